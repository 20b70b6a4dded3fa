/**
 * One run names every problem of a configuration, each in the project's words: the key, what was
 * given (unless it is a secret) and what is accepted. Before, a run stopped at the first schema
 * error, a rule error hid the next, and schema errors were zod's defaults.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";
import { ConfigError, ConfigProblemsError } from "../../../lib/errors";

const ROOT = resolve(import.meta.dirname, "../../..");
const run = promisify(execFile);

/** Five bad keys of five kinds, and features that hid a missing broker_urls. */
const FIVE_BAD = [
  "helper: /usr/local/bin/helper",
  "workers: -1",
  "loglevel: verbose",
  "protocol_version: 3",
  "choria_insecure: sometimes",
  "features:",
  "  pki: true",
  "  ed25519: true",
  "",
].join("\n");
const FIVE_KEYS = ["workers", "loglevel", "protocol_version", "choria_insecure", "features.ed25519", "broker_urls"];

/** zod's own wording, which must not reach the user. */
const ZOD_VOICE = /Too small|Too big|Invalid input|Invalid option|expected .* to be|received /;

function refusal(document: Record<string, unknown>): ConfigError {
  try {
    parseConfig(document, { env: {} });
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("the configuration was accepted");
}

function problemsOf(document: Record<string, unknown>): ConfigError[] {
  const error = refusal(document);
  return error instanceof ConfigProblemsError ? [...error.problems] : [error];
}

describe("every problem in one run", () => {
  it("names all the bad keys of a file, and the missing broker_urls the features error hid", () => {
    // Act
    const result = checkDeploymentConfig(FIVE_BAD);

    // Assert
    expect(result.errors.map((error) => error.key).sort()).toEqual([...FIVE_KEYS].sort());
    for (const error of result.errors) expect(error.message).not.toMatch(ZOD_VOICE);
  });

  it.each([
    ["a number below its minimum", { workers: -1 }, "workers", "must be at least 0 hosts; got -1 hosts"],
    ["a number above its maximum", { monitor_port: 70000 }, "monitor_port", "must be at most 65535; got 70000"],
    ["a fraction for a whole number", { workers: 1.5 }, "workers", "must be a whole number of hosts; got 1.5 hosts"],
    ["a word for a number", { discovery_max_nodes: "many" }, "discovery_max_nodes", 'must be a number of identities; got "many"'],
    ["a value outside a list", { loglevel: "verbose" }, "loglevel", 'must be debug, info, warn or error; got "verbose"'],
    ["a value outside a union", { protocol_version: 3 }, "protocol_version", "must be 1 or 2; got 3"],
    ["a word for a flag", { choria_insecure: "sometimes" }, "choria_insecure", 'must be true or false; got "sometimes"'],
    ["a single value for a list", { cert_deny_list: "x" }, "cert_deny_list", 'must be a list; got "x"'],
    ["a list for a mapping", { lease: ["1m"] }, "lease", "must be a mapping of keys; got a list of 1"],
    ["a number for text", { site: 5 }, "site", "must be text (a YAML string); got 5"],
  ])("says what is accepted for %s", (_kind, change, key, reason) => {
    // Act
    const problems = problemsOf({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], ...change });

    // Assert
    expect(problems.map((problem) => [problem.key, problem.reason])).toEqual([[key, reason]]);
  });

  it("never repeats a secret's value in a schema error", () => {
    // Act
    const problems = problemsOf({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], token: 4711_0815_2342 });

    // Assert
    expect(problems.map((problem) => problem.reason)).toEqual(["must be text (a YAML string)"]);
  });

  it("keeps one problem's message as it was, and lists the others after the first", () => {
    // Act
    const one = problemsOf({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], workers: -1 });
    const error = refusal({ workers: -1, loglevel: "loud" });

    // Assert
    expect(one).toHaveLength(1);
    expect(error.message).toMatch(/^invalid configuration key "workers": must be at least 0 hosts; got -1 hosts \(and 3 more: "loglevel": .*"helper": .*"broker_urls": /);
  });
});

describe("npm run check-config", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "check-config-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function checkConfig(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return run(process.execPath, ["--import", "tsx", join(ROOT, "scripts/check-config.ts"), ...args], { cwd: ROOT }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
    );
  }

  it("prints one line per bad key of the file in one run", async () => {
    // Arrange
    const file = join(dir, "five-bad.yaml");
    await writeFile(file, FIVE_BAD);

    // Act
    const { code, stderr } = await checkConfig(file);

    // Assert
    expect(code).toBe(1);
    const keys = stderr
      .trim()
      .split("\n")
      .filter((line) => line.includes(": error: "))
      .map((line) => line.split(": error: ")[1]?.split(":")[0]);
    expect(keys.sort()).toEqual([...FIVE_KEYS].sort());
  });

  it("--help prints the usage and succeeds", async () => {
    // Act
    const { code, stdout } = await checkConfig("--help");

    // Assert
    expect(code).toBe(0);
    expect(stdout).toMatch(/^usage: npm run check-config -- /);
    expect(stdout).toContain("--allow-literal-secrets");
  });
});
