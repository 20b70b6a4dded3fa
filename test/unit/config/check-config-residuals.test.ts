/**
 * What check-config still got wrong after it learnt to report every problem in one run (issue 32,
 * point 7): the `interval` whole-minutes rule and the site a lease needs were only seen once every
 * other error was fixed (they ran after the configuration parsed, or not at all before start-up);
 * messages gave bare numbers (`rpc_ttl: must be at least 30`) or milliseconds for keys written as
 * Go durations (`10000 ms must be shorter than ... (7000 ms)`); a misspelt key was only "unknown".
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { parseConfig } from "../../../lib/config/config";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";
import { ConfigError, ConfigProblemsError } from "../../../lib/errors";
import { RecordingLogger } from "../../support/fakes";

const ROOT = resolve(import.meta.dirname, "../../..");
const run = promisify(execFile);

/** Deployable as it stands; each case adds what breaks it. */
const DEPLOYABLE = {
  site: "lon",
  helper_function: "choria-provisioner-helper",
  broker_urls: ["tls://broker.example.net:4222"],
};

const check = (document: Record<string, unknown>) => checkDeploymentConfig(stringify(document), { exists: () => true });

/** Every problem parseConfig names, as `[key, reason]`. */
function refusals(document: Record<string, unknown>): Array<[string, string]> {
  try {
    parseConfig(document, { env: {} });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const problems = error instanceof ConfigProblemsError ? error.problems : [error];
    return problems.map((problem) => [problem.key, problem.reason]);
  }
  throw new Error("the configuration was accepted");
}

describe("every problem in one pass, the rules across keys included", () => {
  it("reports an interval that is not whole minutes together with the other errors", () => {
    // Act
    const result = check({ ...DEPLOYABLE, interval: "90s", workers: -1, rpc_ttl: 10 });

    // Assert
    expect(result.errors.map((error) => error.key).sort()).toEqual(["interval", "rpc_ttl", "workers"]);
    expect(result.discoverSchedule).toBe("rate(1 minute)");
  });

  it("reports the site a lease needs, the lease timing and the interval in the same run", () => {
    // Arrange: no site with leader_election, which every function refused at start and check-config let through.
    const { site: _site, ...withoutSite } = DEPLOYABLE;

    // Act
    const result = check({ ...withoutSite, leader_election: true, interval: "150s", lease: { duration: "12s", renew_interval: "11s", skew_bound: "1s" } });

    // Assert
    expect(result.errors.map((error) => error.key).sort()).toEqual(["interval", "lease.duration", "lease.renew_interval", "site"]);
  });

  it("refuses leader_election without a site at start-up too, naming the key", () => {
    // Act
    const problems = refusals({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], leader_election: true, deployment_id: "east" });

    // Assert
    expect(problems).toEqual([["site", "is required when leader_election is on: the lease is kept per site"]]);
  });

});

describe("units in every message", () => {
  it.each<[string, Record<string, unknown>, string, string]>([
    ["rpc_ttl below its minimum, in seconds", { rpc_ttl: 10 }, "rpc_ttl", "must be at least 30 seconds; got 10 seconds"],
    ["rpc_ttl above its maximum", { rpc_ttl: 400 }, "rpc_ttl", "must be at most 300 seconds; got 400 seconds"],
    ["rpc_ttl written as a duration", { rpc_ttl: "30s" }, "rpc_ttl", 'must be a number of seconds; got "30s"'],
    ["a count of hosts", { renew: { max_in_flight: 3000 } }, "renew.max_in_flight", "must be at most 2000 hosts; got 3000 hosts"],
    ["a rate", { renew: { rate: 0 } }, "renew.rate", "must be at least 1 request a minute; got 0 requests a minute"],
    ["a duration without its unit", { interval: 60 }, "interval", "must be a duration: a number with its unit, such as 30s, 5m or 1h30m; got 60"],
    ["an interval under a minute", { interval: "30s" }, "interval", 'must be at least 1m (for example 1m, 5m or 1h); got "30s"'],
    ["a zero duration", { helper_timeout: "0s" }, "helper_timeout", 'must be a positive duration, such as 30s or 5m; got "0s"'],
    ["a duration in an unknown unit", { discovery_timeout: "2x" }, "discovery_timeout", 'invalid duration "2x": unknown unit "x" (a number with its unit, such as 30s, 5m, 1h30m or 7d)'],
    [
      "a renew interval the lease validity does not cover, in the keys' own unit",
      { lease: { duration: "12s", renew_interval: "10s", skew_bound: "5s" } },
      "lease.renew_interval",
      "10s must be shorter than lease.duration minus lease.skew_bound (12s - 5s = 7s)",
    ],
    [
      "a lease too short for the longest RPC attempt",
      { site: "lon", leader_election: true, deployment_id: "east", lease: { duration: "25s", renew_interval: "2s", skew_bound: "5s" } },
      "lease.duration",
      "lease.duration minus lease.skew_bound (25s - 5s = 20s) must cover the longest RPC attempt (22s), or the pause gate never opens",
    ],
    [
      "a helper timeout longer than one lease validity",
      { site: "lon", leader_election: true, deployment_id: "east", helper_timeout: "26s" },
      "helper_timeout",
      "26s must fit in one lease validity (lease.duration minus lease.skew_bound: 30s - 5s = 25s), or every host pauses at the helper step",
    ],
  ])("says it for %s", (_case, change, key, reason) => {
    // Act
    const problems = refusals({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], ...change });

    // Assert
    expect(problems).toEqual([[key, reason]]);
    expect(reason).not.toMatch(/\d+ (ms|s)\b/);
  });

  it("logs the configuration's durations as they are written, not in milliseconds", () => {
    // Act
    const config = parseConfig(
      { helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], interval: "5m", lease: { duration: "45s" }, renew: { before: "7d" } },
      { env: {} },
    );

    // Assert
    expect(config.redacted()).toMatchObject({ interval: "5m", helper_timeout: "10s", lease: { duration: "45s", skew_bound: "5s" }, renew: { before: "168h", timeout: "15m" } });
  });

  it("says the interval a deployment can schedule in minutes, next to what was written", () => {
    // Act
    const result = check({ ...DEPLOYABLE, interval: "90s" });

    // Assert
    expect(result.errors).toEqual([
      { key: "interval", message: 'must be a whole number of minutes (1m or 2m, not 1m30s): it is also the discovery schedule, an EventBridge rate; got "90s"' },
    ]);
  });
});

describe("did you mean, for a misspelt key", () => {
  it.each([
    ["rpc_tll", { rpc_tll: 30 }, "rpc_ttl"],
    ["Interval", { Interval: "5m" }, "interval"],
    ["lease_duration", { lease_duration: "30s" }, "lease.duration"],
    ["lease.skeww_bound", { lease: { skeww_bound: "1s" } }, "lease.skew_bound"],
    ["renew.rat", { renew: { rat: 5 } }, "renew.rate"],
    ["helper_timout", { helper_timout: "5s" }, "helper_timeout"],
  ])("names the known key %s was likely meant to be", (key, change, meant) => {
    // Act
    const result = check({ ...DEPLOYABLE, ...change });

    // Assert
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([{ key, message: `unknown key, did you mean "${meant}"? It is ignored (the Go daemon ignores unknown keys too)` }]);
  });

  it("suggests nothing for a key far from every known one", () => {
    // Act
    const result = check({ ...DEPLOYABLE, flavour: "mint" });

    // Assert
    expect(result.warnings).toEqual([{ key: "flavour", message: "ignoring unknown configuration key: the Go daemon ignores it too" }]);
  });

  it("puts the suggestion in the start-up warning too", () => {
    // Arrange
    const logger = new RecordingLogger();

    // Act
    parseConfig({ helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"], rpc_tll: 30, flavour: "mint" }, { env: {}, logger });

    // Assert
    expect(logger.at("warn").map((record) => record.attributes)).toEqual([{ setting: "rpc_tll", didYouMean: "rpc_ttl" }, { setting: "flavour" }]);
  });
});

describe("npm run check-config", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "check-config-codes-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const checkConfig = (...args: string[]) =>
    run(process.execPath, ["--import", "tsx", join(ROOT, "scripts/check-config.ts"), ...args], { cwd: ROOT }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (error: { code: number; stderr: string }) => error,
    );

  it("prints every error of the file, the interval's among them, and exits 1", async () => {
    // Arrange
    const file = join(dir, "several.yaml");
    await writeFile(file, stringify({ ...DEPLOYABLE, interval: "90s", workers: -1, rpc_ttl: 10, loglevel: "loud" }));

    // Act
    const { code, stderr } = await checkConfig(file);

    // Assert
    expect(code).toBe(1);
    const keys = stderr
      .split("\n")
      .filter((line) => line.includes(": error: "))
      .map((line) => line.split(": error: ")[1]?.split(":")[0]);
    expect(keys.sort()).toEqual(["interval", "loglevel", "rpc_ttl", "workers"]);
  }, 30_000);

  it("exits 2, not 1, for a usage mistake, and names it in one line", async () => {
    // Act
    const singleDash = await checkConfig("-json", "config/local.yaml");
    const noFile = await checkConfig();

    // Assert: "-json" is a mistyped option, not a second file.
    expect(singleDash.code).toBe(2);
    expect(singleDash.stderr.split("\n")[0]).toBe("check-config: unknown option -json");
    expect(noFile.code).toBe(2);
    expect(noFile.stderr.split("\n")[0]).toBe("check-config: no file given");
  }, 60_000);
});
