/**
 * `choria-provisioner renew`: the command's options, usage and printing; the use case (renewal by
 * hand, and resuming renewal after it paused itself) is lib/app/operator.ts's RenewalOperator.
 */
import type { RenewalReport, RenewSelection } from "../lib/app/renewal-state";
import type { RenewalCapacity } from "../lib/app/renewal-capacity";
import type { RenewalOperator, RenewRequestResult } from "../lib/app/operator";
import { parseDuration } from "../lib/config/duration";
import { ProvisionerError } from "../lib/errors";

/** A mistake in the renew command's options: the CLI prints the usage with it. */
export class RenewUsageError extends ProvisionerError {}

/** The renew command's own options, spread into the CLI's option table. */
export const RENEW_OPTIONS = {
  identity: { type: "string", multiple: true },
  "due-within": { type: "string" },
  rate: { type: "string" },
  "dry-run": { type: "boolean" },
  resume: { type: "boolean" },
} as const;

export const RENEW_USAGE = `  renew (--identity X... | --due-within 7d | --all) [--rate N] [--dry-run]
                              send hosts reprovision to renew their credentials, under the current term
                              (carried out by the leader's next renew run); --dry-run lists them
  renew --resume              resume renewal after it paused itself
`;

/** The selection the command line asks for; exactly one of --identity, --due-within and --all. */
function renewSelection(values: { identity?: string[]; "due-within"?: string; all?: boolean }): RenewSelection {
  const given = [values.identity?.length ? 1 : 0, values["due-within"] ? 1 : 0, values.all ? 1 : 0].reduce((a, b) => a + b, 0);
  if (given !== 1) throw new RenewUsageError("renew takes exactly one of --identity, --due-within and --all");
  if (values.identity?.length) return { identities: values.identity };
  if (values["due-within"]) {
    let ms: number;
    try {
      ms = parseDuration(values["due-within"]);
    } catch (error) {
      throw new RenewUsageError(`--due-within ${values["due-within"]} is not a duration`, { cause: error });
    }
    if (!(ms > 0)) throw new RenewUsageError("--due-within must be a positive duration");
    return { dueWithinMs: ms };
  }
  return { all: true };
}

function renewRate(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const rate = Number(text);
  if (!Number.isInteger(rate) || rate < 1) throw new RenewUsageError(`--rate ${text} must be a whole number of hosts per minute, at least 1`);
  return rate;
}

function formatRenewRequest(result: RenewRequestResult): string {
  const verb = result.dryRun ? "would renew" : "renewal requested for";
  const lines = [
    `${verb} ${result.hosts.length} hosts under term ${result.term}${result.ratePerMinute ? ` at ${result.ratePerMinute} a minute` : ""}` +
      (result.dryRun || result.hosts.length === 0 ? "" : "; the leader's next renew run starts sending"),
  ];
  if (result.replaced !== undefined) lines.push(`(replaces an earlier request with ${result.replaced} hosts still to send)`);
  for (const host of result.hosts) lines.push(`  ${host.identity}  ${host.kind} expires ${new Date(host.expiresAt).toISOString()}`);
  for (const skip of result.skipped) lines.push(`  not ${skip.identity}: ${skip.reason}`);
  return lines.join("\n");
}

/** The renewal lines of `choria-provisioner status`. */
export function formatRenewalReport(report: RenewalReport & { capacity?: RenewalCapacity }, now: number): string {
  const { expiry } = report;
  const lines = [
    `credentials: ${expiry.known} hosts with a known expiry; expired ${expiry.expired}, at risk ${expiry.atRisk}, within 24h ${expiry.within24h}, 7d ${expiry.within7d}, 30d ${expiry.within30d}`,
    report.paused
      ? `renewal: PAUSED since ${new Date(report.paused.at).toISOString()}: ${report.paused.reason} (choria-provisioner renew --resume)`
      : `renewal: ${report.inFlight} hosts in flight, ${report.failing} failed and tried again later`,
  ];
  if (report.capacity) lines.push(capacityLine(report.capacity));
  if (report.requested) lines.push(`operator request of term ${report.requested.term}: ${report.requested.remaining} hosts still to send`);
  if (expiry.next.length > 0) {
    lines.push("next due:");
    for (const next of expiry.next) lines.push(`  ${next.identity}  ${next.kind}  in ${Math.round((next.expiresAt - now) / 3_600_000)}h`);
  }
  if (report.failed.length > 0) {
    lines.push("renewal failed, tried again:");
    for (const failed of report.failed) {
      lines.push(`  ${failed.identity}: ${failed.reason} (${failed.attempts} tries; next ${new Date(failed.retryAt).toISOString()})`);
    }
  }
  if (expiry.expiredHosts.length > 0) {
    lines.push("EXPIRED:");
    for (const host of expiry.expiredHosts) lines.push(`  ${host.identity}  ${host.kind} expired ${new Date(host.expiredAt).toISOString()}: ${host.action}`);
  }
  return lines.join("\n");
}

function capacityLine(capacity: RenewalCapacity): string {
  const sustains = `sustains ${capacity.ratePerMinute.toFixed(2)} a minute (${capacity.limitedBy})`;
  if (capacity.canKeepUp) return `renewal capacity: keeps up with ${capacity.hostsToRenew} hosts (needs ${capacity.requiredRatePerMinute} a minute, ${sustains})`;
  const first = capacity.firstMissIdentity ? `; first: ${capacity.firstMissIdentity} by ${new Date(capacity.firstMissAt ?? 0).toISOString()}` : "";
  return (
    `renewal capacity: CANNOT KEEP UP: ${capacity.hostsThatWouldExpire} hosts would expire first${first}; needs ${capacity.requiredRatePerMinute} a minute ` +
    `(max_in_flight ${capacity.requiredMaxInFlight}), ${sustains}: short by ${capacity.shortfallPerMinute} a minute`
  );
}

/** The command's values as the CLI parsed them (its own options plus --all, --json's printer and --by). */
export interface RenewCliValues {
  identity?: string[];
  "due-within"?: string;
  all?: boolean;
  rate?: string;
  "dry-run"?: boolean;
  resume?: boolean;
  by?: string;
}

/** Runs `renew` for the CLI; identities may also be given as positional arguments. Returns the exit code. */
export async function runRenew(
  renewal: RenewalOperator,
  values: RenewCliValues,
  positionals: readonly string[],
  print: (value: unknown, human: () => string) => void,
  user: string | undefined,
): Promise<number> {
  if (values.resume) {
    if (values.identity || values["due-within"] || values.all || positionals.length > 0) throw new RenewUsageError("renew --resume takes no selection");
    const resumed = await renewal.resume();
    print(resumed, () => (resumed.resumed ? `renewal resumed (it had paused because ${resumed.reason})` : "renewal was not paused"));
    return 0;
  }
  const identities = [...(values.identity ?? []), ...positionals];
  const selection = renewSelection({ ...values, ...(identities.length > 0 ? { identity: identities } : {}) });
  const rate = renewRate(values.rate);
  const by = values.by ?? user;
  const result = await renewal.request({ selection, dryRun: values["dry-run"] === true, ...(rate === undefined ? {} : { ratePerMinute: rate }), ...(by ? { by } : {}) });
  print(result, () => formatRenewRequest(result));
  return result.skipped.length === 0 ? 0 : 1;
}
