/**
 * `choria-provisioner registry merge`: the command's options, usage and printing; the use case is
 * lib/app/registry-merge.ts, opened on the stack by lib/aws/operator-stack.ts.
 */
import type { HostMergeLine, RegistryMerge, RegistryMergeReport, RenewalMergeLine } from "../lib/app/registry-merge";
import { UsageError } from "./usage-error";

/** The command's own options, spread into the CLI's option table. */
export const MERGE_OPTIONS = {
  from: { type: "string", multiple: true },
  apply: { type: "boolean" },
} as const;

export const REGISTRY_HELP = `  registry merge --from TABLE [--from TABLE...] [--apply]
                              merge other admission tables (name or ARN) of the site into this stack's
                              (--admission-table): every host, each with its latest credentials and their
                              expiry, and renewal's state. A dry run unless --apply
`;

const PAST: Record<HostMergeLine["action"], string> = {
  copy: "copied",
  replace: "replaced the target's entry",
  "fill-expiry": "filled in the target's expiry",
  keep: "kept the target's entry",
};
const PLANNED: Record<HostMergeLine["action"], string> = {
  copy: "would copy",
  replace: "would replace the target's entry",
  "fill-expiry": "would fill in the target's expiry",
  keep: "would keep the target's entry",
};
const WHY: Record<HostMergeLine["reason"], string> = {
  absent: "the target has no entry",
  "source-issued-later": "the source's credentials were issued later",
  "target-issued-later": "the target's credentials were issued later",
  "same-issue": "both hold the same credentials",
  "target-has-no-expiry": "the target's entry has no credential expiry",
  "target-claimed": "the source's credentials are later, but a worker is provisioning the host in the target",
};

const iso = (epochMs: number) => new Date(epochMs).toISOString();

/** `from` is named when there are several sources. */
function hostLine(line: HostMergeLine, dryRun: boolean, several: boolean): string {
  const from = several ? ` (from ${line.from})` : "";
  if (line.gaveUp) {
    return `${line.identity}${from}: not merged: the target kept changing while the merge tried to ${PLANNED[line.action].slice("would ".length)}; run the merge again`;
  }
  const expiry = line.expiresAt === undefined ? "no credential expiry" : `credentials expire ${iso(line.expiresAt)}`;
  const retried = line.retries > 0 ? `; the target changed during the merge, decided again ${line.retries}x` : "";
  return `${line.identity}${from}: ${(dryRun ? PLANNED : PAST)[line.action]}: ${WHY[line.reason]}; ${expiry}${retried}`;
}

function renewalLine(line: RenewalMergeLine, dryRun: boolean): string {
  const verb = (done: string, planned: string) => (dryRun ? planned : done);
  const head = `renewal state from ${line.from}: `;
  if (line.action === "none") return `${head}the source has none`;
  if (line.action === "keep") return `${head}nothing to add`;
  if (line.action === "copy") return `${head}${verb("copied", "would copy")} (the target has none)`;
  const parts = [
    ...(line.addedInFlight.length > 0 ? [`${line.addedInFlight.length} hosts in flight (${line.addedInFlight.join(", ")})`] : []),
    ...(line.pausedFromSource ? ["its pause"] : []),
  ];
  return `${head}${verb("added", "would add")} ${parts.join(" and ")}`;
}

/** One line per host, the renewal state, then the Choria CLI's "Finished processing N hosts". */
function formatMergeReport(report: RegistryMergeReport): string {
  const { counts, dryRun } = report;
  const lines = [
    `${dryRun ? "dry run: would merge" : "merged"} ${report.sources.join(", ")} into ${report.target}, site "${report.site}"`,
    ...report.hosts.map((line) => hostLine(line, dryRun, report.sources.length > 1)),
    ...report.renewal.map((line) => renewalLine(line, dryRun)),
    "",
    `Finished processing ${report.hosts.length} hosts: ${counts.copy} ${dryRun ? "to copy" : "copied"}, ` +
      `${counts.replace} ${dryRun ? "to replace" : "replaced"}, ${counts["fill-expiry"]} ${dryRun ? "expiries to fill in" : "expiries filled in"}, ` +
      `${counts.keep} kept, ${counts.gaveUp} not merged`,
  ];
  if (report.nothingToDo) lines.push("Nothing to do: the target already holds every host and expiry of the sources.");
  else if (dryRun) lines.push("Nothing was written: run again with --apply to merge.");
  return lines.join("\n");
}

/** Runs `registry merge` for the CLI; returns the exit code (1 when a host could not be merged). */
export async function runRegistryMerge(
  open: (sources: readonly string[]) => Promise<RegistryMerge<unknown>>,
  values: { from?: string[]; apply?: boolean },
  print: (value: unknown, human: () => string) => void,
): Promise<number> {
  const sources = (values.from ?? []).map((table) => table.trim()).filter((table) => table !== "");
  if (sources.length === 0) throw new UsageError("registry merge needs --from with the table to merge from (a name or ARN)");
  const merge = await open(sources);
  const report = await merge.run({ dryRun: values.apply !== true });
  print(report, () => formatMergeReport(report));
  return report.counts.gaveUp === 0 ? 0 : 1;
}
