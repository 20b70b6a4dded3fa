import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import type { HelperRequest } from "../../../lib/ports/helper";

const EXAMPLES = resolve(dirname(fileURLToPath(import.meta.url)), "../../../examples/helpers");
const NODE_HELPER = `'${process.execPath}' '${join(EXAMPLES, "provision-helper.mjs")}'`;
const SHELL_HELPER = `'${join(EXAMPLES, "provision-helper.sh")}'`;
/** Short enough to keep the suite fast, long enough for `node` to start on a busy machine. */
const TIMEOUT_MS = 5_000;
const CLAIM_TOKEN = "provisioning-claim-token-4711";

function request(identity: string, overrides: Partial<HelperRequest> = {}): HelperRequest {
  return {
    identity,
    csr: null,
    ed25519_pubkey: null,
    inventory: JSON.stringify({ agents: ["rpcutil"], facts: {}, version: "0.29.4" }),
    jwt: { cht: CLAIM_TOKEN, chu: "nats://broker:4222" },
    ...overrides,
  };
}

async function helperErrorOf(promise: Promise<unknown>): Promise<HelperError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (error instanceof HelperError) return error;
  throw new Error(`expected a HelperError, got ${String(error)}`);
}

/** Running, as opposed to gone or a zombie (a killed orphan stays a zombie until something reaps it). */
async function isRunning(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

describe.each([
  ["node example helper", NODE_HELPER],
  ["bash + jq example helper", SHELL_HELPER],
])("ExecHelperRunner with the %s", (_name, command) => {
  const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

  it("configures a node that sent an ed25519 key", async () => {
    // Act
    const response = await runner.run(
      request("n1.example.net", { ed25519_pubkey: { public_key: "aa", directory: "/etc/choria", signature: "bb" } }),
    );

    // Assert
    expect(response.defer).toBe(false);
    expect(response.shutdown).toBe(false);
    expect(response.configuration).toMatchObject({
      identity: "n1.example.net",
      collectives: "mcollective",
      "plugin.choria.server.provision": "false",
      "plugin.security.provider": "choria",
      "plugin.security.choria.token_file": "/etc/choria/server.jwt",
    });
    expect(response.configuration["plugin.choria.middleware_hosts"]).toMatch(/^nats:\/\//);
  });

  it("leaves the security provider alone without an ed25519 key and keeps the CSR's ssldir", async () => {
    // Act
    const response = await runner.run(request("n2.example.net", { csr: { csr: "PEM", public_key: "PUB", ssldir: "/etc/choria/ssl" } }));

    // Assert
    expect(response.configuration["plugin.security.provider"]).toBeUndefined();
    expect(response.ssldir).toBe("/etc/choria/ssl");
  });

  it("defers defer- identities", async () => {
    // Act
    const response = await runner.run(request("defer-n3.example.net"));

    // Assert
    expect(response.defer).toBe(true);
    expect(response.msg).toContain("defer-n3.example.net");
  });

  it("asks shutdown- identities to shut down", async () => {
    // Act
    const response = await runner.run(request("shutdown-n4.example.net"));

    // Assert
    expect(response.shutdown).toBe(true);
    expect(response.defer).toBe(false);
  });

  it("defers everything with PROVISION_HELPER_DEFER=true and passes PROVISION_HELPER_UPGRADE", async () => {
    // Arrange
    const deferring = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS, env: { PROVISION_HELPER_DEFER: "true" } });
    const upgrading = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS, env: { PROVISION_HELPER_UPGRADE: "0.30.0" } });

    // Act
    const deferred = await deferring.run(request("n5.example.net"));
    const upgraded = await upgrading.run(request("n5.example.net"));

    // Assert
    expect(deferred.defer).toBe(true);
    expect(upgraded.upgrade).toBe("0.30.0");
  });
});

describe("ExecHelperRunner failures", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "provisioner-helper-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function script(name: string, body: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, `#!/bin/sh\n${body}\n`);
    await chmod(path, 0o755);
    return `'${path}'`;
  }

  it("kills the whole process group on timeout", async () => {
    // Arrange
    const pidFile = join(dir, "grandchild.pid");
    const command = await script("slow.sh", `sleep 120 &\necho $! > '${pidFile}'\nsleep 120`);
    const runner = new ExecHelperRunner({ command, timeoutMs: 300 });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("timed out after 300 ms");
    const grandchild = Number(await readFile(pidFile, "utf8"));
    await expect.poll(() => isRunning(grandchild)).toBe(false);
  });

  it("a non-zero exit is an error that carries the stderr tail", async () => {
    // Arrange
    const command = await script("crash.sh", `cat > /dev/null\necho '{"configuration":{"a":"b"}}'\necho 'database unreachable' >&2\nexit 3`);
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("exited with code 3");
    expect(error.message).toContain("database unreachable");
  });

  it("never reports stdin content, even when the helper echoes it to stderr", async () => {
    // Arrange
    const command = await script("echo-stdin.sh", "cat >&2\necho '{}'\nexit 1");
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("exited with code 1");
    expect(error.message).not.toContain(CLAIM_TOKEN);
  });

  it("zero bytes of output is an error, reported before the exit status as in Go", async () => {
    // Arrange
    const silentOk = new ExecHelperRunner({ command: await script("silent.sh", "exit 0"), timeoutMs: TIMEOUT_MS });
    const silentFail = new ExecHelperRunner({ command: await script("silent-fail.sh", "exit 2"), timeoutMs: TIMEOUT_MS });

    // Act
    const errors = [await helperErrorOf(silentOk.run(request("n1"))), await helperErrorOf(silentFail.run(request("n1")))];

    // Assert
    for (const error of errors) expect(error.message).toContain("zero bytes received");
  });

  it("output above the cap is an error", async () => {
    // Arrange
    const command = await script("huge.sh", "yes aaaaaaaaaaaaaaaa | head -c 3000000");
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("output too large");
  });

  it("non-JSON output is an error that does not quote the output", async () => {
    // Arrange
    const command = await script("text.sh", "echo 'BEGIN PRIVATE KEY hello'");
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("not valid JSON");
    expect(error.message).not.toContain("PRIVATE KEY");
  });

  it("missing fields take Go zero values", async () => {
    // Arrange
    const command = await script("partial.sh", `echo '{"configuration":{"identity":"n1"}}'`);
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const response = await runner.run(request("n1"));

    // Assert
    expect(response).toMatchObject({ defer: false, shutdown: false, msg: "", key: "", server_claims: null, opa_policies: {} });
    expect(response.configuration).toEqual({ identity: "n1" });
  });

  it("a wrong type is an error naming the field", async () => {
    // Arrange
    const command = await script("wrong-type.sh", `echo '{"defer":"yes","configuration":{}}'`);
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain('field "defer"');
  });

  it("a helper that never reads stdin still works", async () => {
    // Arrange
    const command = await script("no-stdin.sh", `echo '{"msg":"ignored input"}'`);
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const response = await runner.run(request("n1", { inventory: "x".repeat(2_000_000) }));

    // Assert
    expect(response.msg).toBe("ignored input");
  });

  it("passes shell-style quoted arguments without a shell", async () => {
    // Arrange
    const path = await script("args.sh", `printf '{"msg":"%s|%s"}' "$1" "$2"`);
    const runner = new ExecHelperRunner({ command: `${path} "two words" '$HOME'`, timeoutMs: TIMEOUT_MS });

    // Act
    const response = await runner.run(request("n1"));

    // Assert
    expect(response.msg).toBe("two words|$HOME");
  });

  it("a command that cannot start is an error", async () => {
    // Arrange
    const runner = new ExecHelperRunner({ command: join(dir, "does-not-exist"), timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toBe(`cannot start ${join(dir, "does-not-exist")}: no such file (ENOENT)`);
  });

  it("names the whole path, and a layer path outside /opt/bin says where layers put executables", async () => {
    // Arrange
    const runner = new ExecHelperRunner({ command: "/opt/provision-helper --site lon", timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toBe("cannot start /opt/provision-helper: no such file (ENOENT); a helper layer's executables are in /opt/bin");
    expect(error.message.match(/helper/g)).toEqual(["helper", "helper"]);
  });

  it("masks every known secret in the stderr it quotes: configured, given, returned, escaped or re-wrapped", async () => {
    // Arrange
    const configured = "configured-broker-password-0815";
    const pemBody = ["MC4CAQAwBQYDK2VwBCIEIKzM0b1Hc4cGd2lqR0xxb3pnTjFrUEZzV2ZiYmNk", "QWxzb0FTZWNvbmRMaW5lT2ZUaGVQcml2YXRlS2V5MDEyMzQ1Njc4OWFiY2Rl"];
    const pem = `-----BEGIN PRIVATE KEY-----\n${pemBody.join("\n")}\n-----END PRIVATE KEY-----`;
    const command = await script(
      "leaky.sh",
      [
        "cat > /dev/null",
        // A partial response, as a helper that crashed half-way through writing it leaves.
        `printf '%s' '{"certificate": "x", "key": ${JSON.stringify(pem)}, "configuration": {"plugin.choria.security.password": "returned-config-secret-42"'`,
        `echo 'the key: ${JSON.stringify(pem)}' >&2`,
        `printf '%s\n' '${pemBody[1]}' >&2`,
        `echo 'wrote returned-config-secret-42 and ${configured} and ${CLAIM_TOKEN}' >&2`,
        "exit 1",
      ].join("\n"),
    );
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS, secretValues: [configured] });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("exited with code 1; stderr: the key: ");
    for (const secret of [configured, CLAIM_TOKEN, "returned-config-secret-42", ...pemBody]) expect(error.message).not.toContain(secret);
    for (const part of pemBody) expect(error.message).not.toContain(part.slice(0, 16));
  });

  it("masks key material it knows nothing of by its shape: a key's END without its BEGIN, a JSON-escaped key, a hex seed", async () => {
    // Arrange: rows of a key whose BEGIN did not make it into stderr's tail, then a whole key
    // JSON-escaped on one line; no value of them is configured, given or on stdout.
    const rows = ["MC4CAQAwBQYDK2VwBCIEIHVua25vd25LZXlNYXRlcmlhbE9uU3RkZXJyMDEy", "TWlkZGxlUm93T2ZUaGVLZXlXaG9zZUJlZ2luV2FzQ3V0T2ZmMDEyMzQ1Njc4"];
    const escaped = JSON.stringify(`-----BEGIN RSA PRIVATE KEY-----\n${rows[1]}\n-----END RSA PRIVATE KEY-----\n`);
    const seed = "9f".repeat(32);
    const command = await script(
      "shapes.sh",
      ["cat > /dev/null", `printf '%s\\n' '${rows[0]}' '${rows[1]}' '-----END PRIVATE KEY-----' 'signer ${seed} loaded' >&2`, `printf '%s\\n' 'got {"k": ${escaped}}' >&2`, "exit 1"].join("\n"),
    );
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toMatch(/zero bytes received; stderr: \[redacted\]\nsigner \[redacted\] loaded\ngot \{"k": "\[redacted\]\\n"\}$/);
    for (const secret of [...rows, seed]) expect(error.message).not.toContain(secret);
  });

  it("caps the quoted stderr after masking, so a secret the cap would cut into is not shown in part", async () => {
    // Arrange
    const secret = `${"s".repeat(40)}-secret-value-${"t".repeat(40)}`;
    // Without masking first, the last 512 characters would start 32 characters before the secret's end.
    const command = await script(
      "long.sh",
      `cat > /dev/null\necho '{}'\nhead -c 20000 /dev/zero | tr '\\0' x >&2\nprintf '%s%s' '${secret}' "$(head -c 480 /dev/zero | tr '\\0' n)" >&2\nexit 1`,
    );
    const runner = new ExecHelperRunner({ command, timeoutMs: TIMEOUT_MS, secretValues: [secret] });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    const quoted = error.message.slice(error.message.indexOf("; stderr: ") + "; stderr: ".length);
    expect(quoted.length).toBeLessThanOrEqual(513);
    expect(quoted).toMatch(/^…x*\[redacted\]n{480}$/);
  });

  it("an empty command line is rejected at construction", () => {
    // Act
    const construct = () => new ExecHelperRunner({ command: "   " });

    // Assert
    expect(construct).toThrow(HelperError);
  });
});

describe("ExecHelperRunner through its launcher process", () => {
  it("starts no helper from the provisioner's own process: its spawn starts at most the launcher, once", async () => {
    // Arrange: the provisioner's child_process.spawn (and the ES module binding of it) now records
    // what it starts, and starts it.
    const childProcess = createRequire(import.meta.url)("node:child_process") as typeof import("node:child_process");
    const ownSpawn = childProcess.spawn;
    const started: string[] = [];
    childProcess.spawn = ((file: string, ...rest: unknown[]) => {
      started.push(file);
      return (ownSpawn as (...args: unknown[]) => unknown)(file, ...rest);
    }) as typeof childProcess.spawn;
    syncBuiltinESMExports();
    const runner = new ExecHelperRunner({ command: SHELL_HELPER, timeoutMs: TIMEOUT_MS });

    try {
      // Act: six helper runs, three at a time.
      const identities = ["n1.example.net", "n2.example.net", "n3.example.net"];
      const first = await Promise.all(identities.map((identity) => runner.run(request(identity))));
      const second = await Promise.all(identities.map((identity) => runner.run(request(identity))));

      // Assert
      expect([...first, ...second].map((response) => response.configuration?.identity)).toEqual([...identities, ...identities]);
      expect(started.filter((file) => file !== process.execPath)).toEqual([]);
      expect(started.length).toBeLessThanOrEqual(1);
    } finally {
      childProcess.spawn = ownSpawn;
      syncBuiltinESMExports();
    }
  });
});
