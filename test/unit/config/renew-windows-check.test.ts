/**
 * Renewal windows and freezes checked before anything runs (lib/config/renew-control.ts): a
 * configuration whose windows leave some credential lifetime with no moment to renew in before it
 * expires is refused by `npm run check-config` (run as docs/renewal.md says) and at package time
 * (config/deployment.cjs), naming the keys; every bad entry is named in the same run.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { stringify } from "yaml";
import { parseConfig } from "../../../lib/config/config";
import { ConfigProblemsError } from "../../../lib/errors";

const ROOT = resolve(import.meta.dirname, "../../..");
const run = promisify(execFile);
const require = createRequire(import.meta.url);
const resolveDeployment = require("../../../config/deployment.cjs") as (context: { resolveVariable: (name: string) => Promise<unknown> }) => Promise<unknown>;

/** Deployable with renewal on; server JWTs (ed25519) valid 30 days, so the shortest renewal window is 20% of that less 15m. */
const SIGNED = {
  site: "lon",
  helper_function: "choria-provisioner-helper",
  broker_urls: ["tls://broker.example.net:4222"],
  features: { jwt: true, ed25519: true },
  jwt_verify_cert: "3b2e7c0f4d8a1e6b5c9f2a7d0e4b8c1f6a3d9e2b7c0f5a8d1e4b7c2f9a6d3e0b",
  jwt_signing_key: "secretsmanager:choria/signing-key",
  server_jwt_validity: "30d",
};
const renewing = (renew: Record<string, unknown>, change: Record<string, unknown> = {}) => ({
  ...SIGNED,
  ...change,
  renew: { enabled: true, broker_urls: ["tls://main.example.net:4222"], ...renew },
});
/**
 * Sundays 02:00-04:00 London: a week less 2 hours closed (167 h across the October change back to
 * GMT), longer than the 5 days 23h45m renewal window.
 */
const WEEKLY = [{ cron: "0 2 * * sun", timezone: "Europe/London", duration: "2h" }];
const NIGHTLY = [{ cron: "0 1 * * *", timezone: "Europe/London", duration: "4h" }];

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "renew-windows-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileOf(document: Record<string, unknown>): Promise<string> {
  const file = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(document));
  return file;
}

/** `npm run check-config -- <file>`, as docs/renewal.md and docs/configuration.md tell the operator. */
async function checkConfig(document: Record<string, unknown>): Promise<{ code: number; errors: string[]; stdout: string }> {
  const file = await fileOf(document);
  const { code, stdout, stderr } = await run("npm", ["run", "--silent", "check-config", "--", file], { cwd: ROOT }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
  return { code, stdout, errors: stderr.split("\n").filter((line) => line.includes(": error: ")).map((line) => line.split(": error: ")[1] ?? "") };
}

const problemsOf = (document: Record<string, unknown>) => {
  try {
    parseConfig(document, { env: { STACK_DEPLOYMENT_ID: "d" } });
  } catch (error) {
    if (error instanceof ConfigProblemsError) return error.problems.map((problem) => ({ key: problem.key, reason: problem.reason }));
    if (error instanceof Error && "key" in error) return [{ key: (error as { key: string }).key, reason: (error as unknown as { reason: string }).reason }];
    throw error;
  }
  return [];
};

describe("renewal windows that leave a credential no moment to renew in", () => {
  it("are refused by npm run check-config, naming the keys and the closed stretch; nightly windows pass", async () => {
    // Act
    const refused = await checkConfig(renewing({ windows: WEEKLY }));
    const accepted = await checkConfig(renewing({ windows: NIGHTLY, freezes: [{ cron: "0 0 24 dec *", timezone: "Europe/London", duration: "3d" }] }));

    // Assert
    expect(refused.code).toBe(1);
    expect(refused.errors).toHaveLength(1);
    expect(refused.errors[0]).toMatch(/^renew\.windows: renew\.windows and renew\.freezes leave renewal no moment to send in for 167h, from \S+ to \S+; /);
    expect(refused.errors[0]).toContain("the shortest renewal window (renew.before 20% of the shortest lifetime 720h (server_jwt_validity) less renew.timeout 15m) is 143h45m");
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toMatch(/: ok \(/);
  }, 60_000);

  it("refuses, when a freeze is as long as the renewal window, naming renew.freezes", () => {
    // Act: a 7-day freeze each new year against a 1-day renew.before.
    const problems = problemsOf(renewing({ before: "1d", freezes: [{ cron: "0 0 1 1 *", duration: "7d" }] }));

    // Assert
    expect(problems).toEqual([{ key: "renew.freezes", reason: expect.stringMatching(/leave renewal no moment to send in for 168h, from \d{4}-01-01T00:00:00Z to \d{4}-01-08T00:00:00Z; the shortest renewal window \(renew\.before 1d less renew\.timeout 15m\) is 23h45m/) }]);
  });

  it("refuses a daily window that daylight saving pushes past the renewal window", () => {
    // Act: 01:30 London for 1 h is 23 h apart on ordinary days, but 01:30 does not occur on the spring-forward day.
    const problems = problemsOf(renewing({ before: "24h", windows: [{ cron: "30 1 * * *", timezone: "Europe/London", duration: "1h" }] }));
    const utc = problemsOf(renewing({ before: "24h", windows: [{ cron: "30 1 * * *", timezone: "UTC", duration: "1h" }] }));

    // Assert
    expect(problems).toEqual([{ key: "renew.windows", reason: expect.stringMatching(/no moment to send in for 46h, from \d{4}-03-\d\dT02:30:00Z to \d{4}-03-\d\dT00:30:00Z/) }]);
    expect(utc).toEqual([]);
  });

  it("refuses windows that can never be met", () => {
    // Act
    const leapDayOnly = problemsOf(renewing({ windows: [{ cron: "0 0 29 feb *", duration: "1h" }] }));
    const never = problemsOf(renewing({ windows: [{ cron: "0 0 31 apr,jun *", duration: "1h" }] }));

    // Assert
    expect(leapDayOnly).toEqual([{ key: "renew.windows", reason: expect.stringContaining("leave no moment in a year when renewal may send: such windows can never be met") }]);
    expect(never).toEqual([{ key: "renew.windows.0.cron", reason: '"0 0 31 apr,jun *" never matches: no month it allows has a day it allows' }]);
  });

  it("names every bad entry in one run, each by its key and entry", () => {
    // Act
    const problems = problemsOf(
      renewing({
        windows: [{ cron: "0 25 * * *", duration: "1h" }, { cron: "0 1 * * *", timezone: "Europe/Lundon", duration: "1h" }, { cron: "0 1 * * *", duration: "90s" }],
        freezes: [{ cron: "0 0 * * *", duration: "forever" }, { cron: "0 0 * * *", duration: "1h", timzone: "UTC" }],
        start_rate: 50,
      }),
    );

    // Assert
    expect(problems).toEqual([
      { key: "renew.windows.0.cron", reason: 'hour "25": "25" is not a number from 0 to 23' },
      { key: "renew.windows.1.timezone", reason: '"Europe/Lundon" is not an IANA timezone (such as UTC, Europe/London or America/New_York)' },
      { key: "renew.windows.2.duration", reason: 'must be whole minutes from 1m to 31d; got "90s"' },
      { key: "renew.freezes.0.duration", reason: 'must be a duration such as 30m or 7d; got "forever"' },
      { key: "renew.freezes.1", reason: "has keys an entry does not take: timzone (it takes cron, timezone, duration)" },
      { key: "renew.start_rate", reason: "50 requests a minute is above renew.rate (10): slow start ramps up to renew.rate from below" },
    ]);
  });

  it("needs renew.shortest_lifetime with a percentage of a lifetime only the helper knows (pki), and checks against it", () => {
    // Arrange
    const pki = { features: { pki: true }, server_jwt_validity: undefined };

    // Act
    const missing = problemsOf(renewing({ windows: NIGHTLY }, pki));
    const short = problemsOf(renewing({ windows: [{ cron: "0 1 * * *", duration: "1h" }], shortest_lifetime: "2d" }, pki));
    const enough = problemsOf(renewing({ windows: NIGHTLY, shortest_lifetime: "30d" }, pki));

    // Assert
    expect(missing).toEqual([{ key: "renew.shortest_lifetime", reason: expect.stringContaining("is required with renew.windows or renew.freezes when renew.before (20%) is a percentage") }]);
    expect(short).toEqual([{ key: "renew.windows", reason: expect.stringContaining("(renew.before 20% of the shortest lifetime 48h (renew.shortest_lifetime) less renew.timeout 15m) is 9h21m") }]);
    expect(enough).toEqual([]);
  });
});

/** What osls resolves for the file: the config path given, fixed names, and each param's default. */
function variables(configPath: string) {
  const fixed: Record<string, string> = { "self:service": "choria-provisioner", "sls:stage": "test", "self:provider.region": "eu-west-1" };
  return async (name: string): Promise<unknown> => {
    if (name.startsWith("param:provisionerConfig")) return configPath;
    if (name in fixed) return fixed[name];
    return /, '(.*)'$/.exec(name)?.[1] ?? "";
  };
}

describe("renewal windows at package time", () => {
  it("fail sls package with the key named, before any template is made", async () => {
    // Arrange
    const file = await fileOf(renewing({ windows: WEEKLY }));
    const printed: string[] = [];
    const spy = vi.spyOn(console, "error").mockImplementation((text: unknown) => void printed.push(String(text)));
    const warned = vi.spyOn(console, "warn").mockImplementation(() => undefined);

    // Act
    const error = await resolveDeployment({ resolveVariable: variables(file) }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    spy.mockRestore();
    warned.mockRestore();

    // Assert
    expect(error?.message).toBe(`${file} cannot be deployed (npm run check-config -- ${file}): (printed above)`);
    const lines = (printed[0] ?? "").split("\n").slice(1);
    expect(lines).toEqual([expect.stringMatching(/^ {2}renew\.windows: renew\.windows and renew\.freezes leave renewal no moment to send in for 167h.*renew\.before 20%.*renew\.timeout 15m/)]);
  }, 60_000);
});
