/**
 * check-config refuses a renewal that can never keep up with the credential lifetime the file
 * configures, one error per problem naming the keys, in the same run as every other problem, and
 * warns with the largest fleet the rate and window renew (lib/config/renew-capacity.ts).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";
import { sustainedRenewRate } from "../../../lib/config/renew-capacity";

const ROOT = resolve(import.meta.dirname, "../../..");
const run = promisify(execFile);

/** Deployable with renewal on; the provisioner signs server JWTs (ed25519), so their lifetime is known. */
const SIGNED = {
  helper_function: "choria-provisioner-helper",
  broker_urls: ["tls://broker.example.net:4222"],
  features: { jwt: true, ed25519: true },
  jwt_verify_cert: "3b2e7c0f4d8a1e6b5c9f2a7d0e4b8c1f6a3d9e2b7c0f5a8d1e4b7c2f9a6d3e0b",
  jwt_signing_key: "secretsmanager:choria/signing-key",
  server_jwt_validity: "30d",
};
const MAIN = ["tls://main.example.net:4222"];
const renewing = (renew: Record<string, unknown>, change: Record<string, unknown> = {}) => ({ ...SIGNED, ...change, renew: { enabled: true, broker_urls: MAIN, ...renew } });
const check = (document: Record<string, unknown>) => checkDeploymentConfig(stringify(document));
const keysOf = (problems: ReadonlyArray<{ key: string }>) => problems.map((problem) => problem.key);

describe("renewal capacity at package time", () => {
  it("warns with the largest fleet of one expiry the defaults renew: 10 a minute over 3 of the 6 days of 20% of 30 days", () => {
    // Act
    const result = check(renewing({}));

    // Assert
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([{ key: "renew.rate", message: expect.stringContaining("at most 43,200 hosts that share one expiry") }]);
    const [warning] = result.warnings;
    expect(warning?.message).toContain("renew.rate 10 a minute");
    expect(warning?.message).toContain("renew.before 20% of the credentials' lifetime (server_jwt_validity 30d) = 6d");
    expect(warning?.message).toContain("beyond 86,250 hosts");
  });

  it("names the in-flight bound when it is what limits: 20 hosts holding their place about 2 minutes is 10 a minute", () => {
    // Act
    const result = check(renewing({ rate: 30, max_in_flight: 20 }));

    // Assert
    expect(result.warnings).toEqual([{ key: "renew.max_in_flight", message: expect.stringContaining("10 a minute (renew.max_in_flight 20 hosts, each holding its place about 2m; renew.rate 30 is not reached)") }]);
  });

  it("names renew.rate when the rate is the limit: 10 a minute over 3 days is 43,200 hosts", () => {
    // Act
    const result = check(renewing({ max_in_flight: 1_000 }));

    // Assert
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([{ key: "renew.rate", message: expect.stringContaining("at most 43,200 hosts") }]);
    expect(result.warnings[0]?.message).toContain("beyond 86,250 hosts (the whole window less renew.timeout)");
  });

  it("refuses a renew.before duration at least as long as the credentials' lifetime", () => {
    // Act
    const result = check(renewing({ before: "30d" }));

    // Assert
    expect(result.errors).toEqual([{ key: "renew.before", message: expect.stringMatching(/^30d is not shorter than the credentials' lifetime \(server_jwt_validity 30d\): every host would be due again the moment it is provisioned/) }]);
  });

  it("refuses a window, as a percentage of the lifetime, not longer than renew.timeout plus one renew run", () => {
    // Act: 20% of 1h is 12 minutes, and a host may be out of service for 15.
    const result = check(renewing({}, { server_jwt_validity: "1h" }));

    // Assert
    expect(result.errors).toEqual([
      {
        key: "renew.timeout",
        message: expect.stringMatching(/^the renewal window \(renew.before 20% of the credentials' lifetime \(server_jwt_validity 1h\) = 12m\) is not longer than renew.timeout \(15m\) plus one renew run \(1m\): not one host/),
      },
    ]);
    expect(result.warnings).toEqual([]);
  });

  it("refuses a window exactly renew.timeout plus one run, and accepts one a minute longer", () => {
    expect(keysOf(check(renewing({ before: "16m" })).errors)).toEqual(["renew.timeout"]);
    expect(check(renewing({ before: "17m" })).errors).toEqual([]);
  });

  it("refuses a renew.before duration too short even when the lifetime comes from the helper (pki)", () => {
    // Act
    const result = check({ ...renewing({ before: "10m" }), features: { pki: true }, jwt_signing_key: undefined });

    // Assert
    expect(keysOf(result.errors)).toEqual(["renew.timeout"]);
  });

  it("reports every problem in one run: both renewal problems and the file's other errors", () => {
    // Act
    const result = check(renewing({ before: "10m" }, { server_jwt_validity: "10m", workers: -1 }));

    // Assert
    expect(keysOf(result.errors).sort()).toEqual(["renew.before", "renew.timeout", "workers"]);
  });

  it("warns when from the window's middle on less than renew.timeout is left, so hosts placed late may not be back in time", () => {
    // Act
    const result = check(renewing({ before: "30m" }));

    // Assert
    expect(result.errors).toEqual([]);
    expect(keysOf(result.warnings)).toEqual(["renew.before", "renew.rate"]);
    expect(result.warnings[0]?.message).toMatch(/hosts placed late in it may still be out of service when their credentials expire/);
  });

  it.each([
    ["renewal is off", { ...SIGNED, server_jwt_validity: "10m", renew: { before: "10m" } }],
    ["the lifetime is the helper's (pki) and renew.before a percentage", { ...renewing({}), features: { pki: true }, jwt_signing_key: undefined }],
  ])("says nothing when %s", (_case, document) => {
    const result = check(document);

    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
  });

  it("leaves a renew key that does not parse to its own error", () => {
    expect(check(renewing({ before: "soon" })).errors).toEqual([{ key: "renew.before", message: expect.not.stringContaining("lifetime") }]);
    expect(keysOf(check(renewing({}, { server_jwt_validity: "forever" })).errors)).toEqual(["server_jwt_validity"]);
  });
});

describe("the sustained renew rate", () => {
  it("is the rate, or the in-flight bound over the time a host holds its place when that is lower", () => {
    expect(sustainedRenewRate({ ratePerMinute: 10, maxInFlight: 50, outOfServiceMs: 15 * 60_000 })).toEqual({ sends: 50, everyMs: 900_000, perMinute: 50 / 15, limitedBy: "renew.max_in_flight" });
    expect(sustainedRenewRate({ ratePerMinute: 10, maxInFlight: 150, outOfServiceMs: 15 * 60_000 })).toEqual({ sends: 10, everyMs: 60_000, perMinute: 10, limitedBy: "renew.rate" });
    expect(sustainedRenewRate({ ratePerMinute: 10, maxInFlight: 50, outOfServiceMs: 2 * 60_000 })).toMatchObject({ perMinute: 10, limitedBy: "renew.rate" });
  });
});

describe("npm run check-config on renewal capacity", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "check-config-renew-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function checkConfig(document: Record<string, unknown>): Promise<{ code: number; stdout: string; stderr: string }> {
    const file = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(file, stringify(document));
    return run(process.execPath, ["--import", "tsx", join(ROOT, "scripts/check-config.ts"), file], { cwd: ROOT }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
    );
  }

  it("fails with one line per renewal problem, and passes with the fleet warning", async () => {
    // Act
    const refused = await checkConfig(renewing({ before: "10m" }, { server_jwt_validity: "10m" }));
    const accepted = await checkConfig(renewing({ max_in_flight: 1_000 }));

    // Assert
    expect(refused.code).toBe(1);
    const errors = refused.stderr.split("\n").filter((line) => line.includes(": error: "));
    expect(errors.map((line) => line.split(": error: ")[1]?.split(":")[0])).toEqual(["renew.before", "renew.timeout"]);
    expect(accepted.code).toBe(0);
    expect(accepted.stderr).toMatch(/: warning: renew.rate: renewal keeps up with at most 43,200 hosts that share one expiry/);
    expect(accepted.stdout).toMatch(/: ok \(discovery rate\(1 minute\), 1 warning\(s\)\)/);
  }, 60_000);
});
