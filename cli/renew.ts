/**
 * `choria-provisioner renew`: the command's options, usage and printing; the use case (renewal by
 * hand, and resuming renewal after it paused itself) is lib/app/operator/renewal-operator.ts.
 */
import type { RenewalReport } from "../lib/app/renewal-state";
import type { RenewSelection } from "../lib/app/use-case-ports";
import type { RenewalCapacity } from "../lib/app/renewal-capacity";
import type { RenewalOperator, RenewRequestResult } from "../lib/app/operator/renewal-operator";
import type { SiteRenewalReport } from "../lib/app/operator/report";
import { parseDuration } from "../lib/config/duration";
import { boxTable } from "./table";
import { ago, plural } from "./text";
import { UsageError } from "./usage-error";

/** The renew command's own options, spread into the CLI's option table. */
export const RENEW_OPTIONS = {
  identity: { type: "string", multiple: true },
  "due-within": { type: "string" },
  rate: { type: "string" },
  "dry-run": { type: "boolean" },
  resume: { type: "boolean" },
} as const;

export const RENEW_USAGE = `  renew (--identity X... | --due-within 7d | --all) [--rate N] [--dry-run] [--by NAME]
                              send hosts reprovision to renew their credentials, under the current term
                              (carried out by the leader's next renew run; refused when no renew run
                              has been seen lately, as nothing would send them); --dry-run lists them
  renew --resume              resume renewal after it paused itself
`;

/** The selection the command line asks for; exactly one of --identity, --due-within and --all. */
function renewSelection(values: { identity?: string[]; "due-within"?: string; all?: boolean }): RenewSelection {
  const given = [values.identity?.length ? 1 : 0, values["due-within"] ? 1 : 0, values.all ? 1 : 0].reduce((a, b) => a + b, 0);
  if (given !== 1) throw new UsageError("renew takes exactly one of --identity, --due-within and --all");
  if (values.identity?.length) return { identities: values.identity };
  if (values["due-within"]) {
    let ms: number;
    try {
      ms = parseDuration(values["due-within"]);
    } catch (error) {
      throw new UsageError(`--due-within ${values["due-within"]} is not a duration`, { cause: error });
    }
    if (!(ms > 0)) throw new UsageError("--due-within must be a positive duration");
    return { dueWithinMs: ms };
  }
  return { all: true };
}

function renewRate(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const rate = Number(text);
  if (!Number.isInteger(rate) || rate < 1) throw new UsageError(`--rate ${text} must be a whole number of hosts per minute, at least 1`);
  return rate;
}

const iso = (epochMs: number) => new Date(epochMs).toISOString();

/** The hosts chosen, one row each, those not taken, then "Finished processing N hosts". */
function formatRenewRequest(result: RenewRequestResult): string {
  const verb = result.dryRun ? "would renew" : "renewal requested for";
  const lines = [
    `${verb} ${plural(result.hosts.length, "host")} under term ${result.term}${result.ratePerMinute ? ` at ${result.ratePerMinute} a minute` : ""}` +
      (result.dryRun || result.hosts.length === 0 ? "" : "; the leader's next renew run starts sending"),
  ];
  if (result.replaced !== undefined) lines.push(`(replaces an earlier request with ${plural(result.replaced, "host")} still to send)`);
  if (result.hosts.length > 0) {
    lines.push(boxTable({ headers: ["host", "credential", "expires"], rows: result.hosts.map((host) => [host.identity, host.kind, iso(host.expiresAt)]) }));
  }
  for (const skip of result.skipped) lines.push(`${skip.identity}: not ${result.dryRun ? "taken" : "requested"}: ${skip.reason}`);
  if (result.wouldBeRefused) lines.push(`Without --dry-run this would be refused: ${result.wouldBeRefused}`);
  const total = result.hosts.length + result.skipped.length;
  lines.push(
    "",
    result.dryRun
      ? `Finished processing ${plural(total, "host")}: ${result.hosts.length} would be renewed, ${result.skipped.length} not; dry run, nothing was requested`
      : `Finished processing ${plural(total, "host")}: ${result.hosts.length} requested for renewal, ${result.skipped.length} not`,
  );
  return lines.join("\n");
}

/** Whether a leader's renew run carries out requests, and the operator's request still open. */
function runLines(report: RenewalReport, now: number): string[] {
  const { runs, requested } = report;
  const lines: string[] = [];
  // A site that never renews and holds no credential to renew need not hear of renew runs.
  if (runs.last || requested || report.expiry.known > 0) {
    lines.push(
      runs.missing
        ? `renew runs: NOT RUNNING: ${runs.missing}`
        : `renew runs: the leader's last run ${ago(now, runs.last?.at)}${runs.last ? ` (term ${runs.last.term})` : ""}`,
    );
  }
  if (requested) {
    const stalled = runs.missing ? ", but no renew run is sending them (renew runs above)" : "";
    lines.push(`operator request of term ${requested.term}: ${plural(requested.remaining, "host")} still to send${stalled}`);
  }
  return lines;
}

/** The renewal lines and tables of `choria-provisioner status`. */
export function formatRenewalReport(report: SiteRenewalReport, now: number): string {
  const { expiry } = report;
  const lines = [
    `credentials: ${expiry.known} hosts with a known expiry; expired ${expiry.expired}, at risk ${expiry.atRisk}, within 24h ${expiry.within24h}, 7d ${expiry.within7d}, 30d ${expiry.within30d}`,
    report.paused
      ? `renewal: PAUSED since ${iso(report.paused.at)}: ${report.paused.reason} (choria-provisioner renew --resume)`
      : `renewal: ${report.inFlight} hosts in flight, ${report.failing} failed and tried again later`,
  ];
  if (report.wave) {
    const { wave } = report;
    lines.push(`renewal wave since ${iso(wave.startedAt)}: sending at most ${wave.ratePerMinute} a minute; ${plural(wave.attempts, "host")} tried, ${wave.failures} failed`);
  }
  if (report.windows) {
    const { open, nextAllowedAt } = report.windows;
    lines.push(
      open
        ? "renewal windows: open now"
        : `renewal windows: CLOSED (outside the windows or in a freeze); next allowed ${nextAllowedAt === undefined ? "not within 32 days" : iso(nextAllowedAt)}; a host that would expire first is renewed anyway`,
    );
  }
  if (report.capacity) lines.push(capacityLine(report.capacity));
  lines.push(...runLines(report, now));
  if (expiry.next.length > 0) {
    lines.push(
      boxTable({
        title: "next due",
        headers: ["host", "credential", "expires"],
        rows: expiry.next.map((next) => [next.identity, next.kind, `in ${Math.round((next.expiresAt - now) / 3_600_000)}h`]),
      }),
    );
  }
  if (report.failed.length > 0) {
    lines.push(
      boxTable({
        title: "renewal failed, tried again",
        headers: ["host", "tries", "next try", "reason"],
        rows: report.failed.map((failed) => [failed.identity, String(failed.attempts), iso(failed.retryAt), failed.reason]),
      }),
    );
  }
  if (expiry.expiredHosts.length > 0) {
    lines.push(
      boxTable({
        title: "EXPIRED",
        headers: ["host", "credential", "expired", "what to do"],
        rows: expiry.expiredHosts.map((host) => [host.identity, host.kind, iso(host.expiredAt), host.action]),
      }),
    );
  }
  return lines.join("\n");
}

function capacityLine(capacity: RenewalCapacity): string {
  const sustains = `sustains ${capacity.ratePerMinute.toFixed(2)} a minute (${capacity.limitedBy})`;
  if (capacity.canKeepUp) return `renewal capacity: keeps up with ${capacity.hostsToRenew} hosts (needs ${capacity.requiredRatePerMinute} a minute, ${sustains})`;
  const first = capacity.firstMissIdentity ? `; first: ${capacity.firstMissIdentity} by ${iso(capacity.firstMissAt ?? 0)}` : "";
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
    if (values.identity || values["due-within"] || values.all || positionals.length > 0) throw new UsageError("renew --resume takes no selection");
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
