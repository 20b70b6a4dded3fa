/**
 * The README's first command on a machine that lacks what the local stack runs on. The PATH is a
 * temp dir holding only node, npm and sh (as on a fresh machine with only Node), the cache is empty:
 * the run stops in one line that names each missing piece and how to install it, exit non-zero, no
 * stack trace. Where Go is present the pinned nats-server is built into the cache and used.
 */
import { execFile } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { connect } from "nats";
import { afterEach, describe, expect, it } from "vitest";
import { findNatsServer, MissingPrerequisiteError, NATS_SERVER_MODULE, NATS_SERVER_VERSION, natsServerCacheDir, onPath } from "../../dev/local/prerequisites";
import { startNats } from "../../dev/local/services";

const ROOT = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);
const temps: string[] = [];

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** A bin dir with only the named commands of this machine linked in. */
function pathWith(...commands: string[]): string {
  const bin = tempDir("first-run-bin-");
  for (const command of commands) {
    const found = onPath(command);
    if (!found) throw new Error(`${command} is not on this machine's PATH`);
    symlinkSync(found, join(bin, command));
  }
  return bin;
}

afterEach(() => {
  for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the first command on a fresh machine", () => {
  it("without nats-server, Java and jq stops in one line naming all three and how to install them", async () => {
    const home = tempDir("first-run-home-");
    const result = await run("npm", ["run", "--silent", "local", "--", "--fast", "--nodes", "3", "--helper", "bash"], {
      cwd: ROOT,
      env: { PATH: pathWith("node", "npm", "sh"), HOME: home, npm_config_update_notifier: "false" },
    }).then(
      () => ({ code: 0, stdout: "", stderr: "" }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    const lines = result.stderr.split("\n").filter((line) => line.trim() !== "");

    expect(result.code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^npm run local: /);
    expect(lines[0]).toContain("apt-get install nats-server");
    expect(lines[0]).toContain(`go install ${NATS_SERVER_MODULE}@${NATS_SERVER_VERSION}`);
    expect(lines[0]).toContain("apt-get install openjdk-17-jre-headless");
    expect(lines[0]).toContain("apt-get install jq");
    expect(result.stderr).not.toMatch(/\n\s+at |ENOENT|Error:/);
    expect(result.stdout).not.toContain("services up");
  }, 120_000);

  it("with Go but no nats-server, builds the pinned nats-server into the cache once and runs it", async () => {
    const home = tempDir("first-run-home-");
    const bin = pathWith("node", "sh");
    const calls = join(home, "go-calls");
    // A stand-in `go` that records what it was asked and installs this machine's nats-server where
    // GOBIN says; the real build is the same command (docs/local-run.md has its time).
    const realNats = onPath("nats-server") as string;
    writeFileSync(join(bin, "go"), `#!/bin/sh\necho "$@" >> '${calls}'\n/bin/ln -s '${realNats}' "$GOBIN/nats-server"\n`);
    chmodSync(join(bin, "go"), 0o755);
    const env = { PATH: bin, HOME: home };
    const said: string[] = [];

    const first = await findNatsServer({ env, say: (message) => said.push(message) });
    const second = await findNatsServer({ env });
    const previous = process.env.NATS_SERVER_BIN;
    process.env.NATS_SERVER_BIN = first;
    const nats = await startNats().finally(() => {
      if (previous === undefined) delete process.env.NATS_SERVER_BIN;
      else process.env.NATS_SERVER_BIN = previous;
    });
    const client = await connect({ servers: nats.url });
    const rtt = await client.rtt().finally(() => client.close());
    await nats.stop();

    expect(first).toBe(join(natsServerCacheDir(env), "nats-server"));
    expect(second).toBe(first);
    expect(readFileSync(calls, "utf8").trim().split("\n")).toEqual([`install ${NATS_SERVER_MODULE}@${NATS_SERVER_VERSION}`]);
    expect(said).toEqual([expect.stringContaining(`building ${NATS_SERVER_VERSION} with go install`)]);
    expect(rtt).toBeGreaterThanOrEqual(0);
  }, 60_000);

  it("refuses --kill-leader-after without --standby in one line, before starting anything", async () => {
    const result = await run("npm", ["run", "--silent", "local", "--", "--fast", "--kill-leader-after", "5"], {
      cwd: ROOT,
      env: { ...process.env, npm_config_update_notifier: "false" },
    }).then(
      () => ({ code: 0, stdout: "", stderr: "" }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );

    expect(result.code).toBe(2);
    expect(result.stderr.trim().split("\n")).toEqual(["npm run local: --kill-leader-after needs --standby: with one deployment nothing can take over (see npm run local -- --help)"]);
    expect(result.stdout).toBe("");
  }, 60_000);

  it("names NATS_SERVER_BIN when it points at nothing", async () => {
    const env = { PATH: pathWith("node"), NATS_SERVER_BIN: "/nonexistent/nats-server" };

    await expect(findNatsServer({ env })).rejects.toThrow(MissingPrerequisiteError);
    await expect(findNatsServer({ env })).rejects.toThrow("NATS_SERVER_BIN is /nonexistent/nats-server, which is not an executable file");
  });
});
