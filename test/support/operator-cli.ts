/**
 * The operator CLI as the operator suites drive it: in-process, against the local emulators, with a
 * stage's table and queue names; and the lease taken directly in the store for a given holder.
 */
import { inject } from "vitest";
import type { DynamoDbLeaseStore } from "../../lib/dynamodb/lease-store";
import { runCli } from "../../cli/cli";
import type { Clock } from "../../lib/ports/clock";

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface OperatorCliTarget {
  stage: string;
  site: string;
  sqsUrl: string;
  clock: Clock;
  /** Added to the environment the CLI reads (endpoints and deployment id are set already). */
  env?: Record<string, string>;
}

/** `cli` and `cliJson` bound to a target that the suite fills in its beforeAll. */
export function operatorCli(target: () => OperatorCliTarget) {
  async function cli(...args: string[]): Promise<CliRun> {
    const { stage, site, sqsUrl, clock, env } = target();
    let stdout = "";
    let stderr = "";
    const code = await runCli(["--stage", stage, "--site", site, ...args], {
      stdout: (text) => (stdout += text),
      stderr: (text) => (stderr += text),
      env: { DYNAMODB_ENDPOINT: inject("dynamoEndpoint"), SQS_ENDPOINT: sqsUrl, PROVISIONER_DEPLOYMENT_ID: "primary", ...env },
      clock,
    });
    return { code, stdout, stderr };
  }
  async function cliJson<T>(...args: string[]): Promise<T> {
    const result = await cli(...args, "--json");
    if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`);
    return JSON.parse(result.stdout) as T;
  }
  return { cli, cliJson };
}

/**
 * Takes the site's lease for `holder` at once, over whatever it holds (a release no longer lets a
 * claim in before the expiry, docs/lease.md), with the bounds the suites' gates use: the default
 * skew bound and no delivery horizon. Returns the new term.
 */
export async function takeLease(store: DynamoDbLeaseStore, site: string, holder: string, now: number): Promise<number> {
  const write = await store.claim({
    site,
    holder,
    expiresAt: now + 30_000,
    expiredBefore: Number.MAX_SAFE_INTEGER,
    waitedHorizonMs: Number.MAX_SAFE_INTEGER,
    skewBoundMs: 5_000,
    deliveryHorizonMs: 0,
    seenAt: now,
  });
  if (!write.applied) throw new Error("could not take the lease");
  return write.item.term;
}
