/**
 * Which runs of bench/peer.ts may be compared, and the per-fleet summary of reports/peer.json.
 * Pure, so the rules are tested without starting a fleet:
 * - a ratio is only reported between two runs that both started on a quiet machine (1-minute load
 *   average at the run's start at or below the core count): other jobs' CPU falls unevenly on the
 *   two sides and the ratio says more about them than about the provisioners;
 * - a ratio is only reported between two runs that both restarted every node: a run stopped at its
 *   bound measured the hosts it reached, not the fleet;
 * otherwise the ratio is null and `not_comparable` says why.
 */
import { round2 } from "./measure";

export type Side = "go" | "ours";
export type HelperKind = "bash" | "compiled";

/** What the summary reads of a run. */
export interface ComparableRun {
  side: Side;
  fleet: string;
  helper: HelperKind;
  setting: string;
  nodes: number;
  restarted: number;
  complete: boolean;
  hosts_per_min: number;
  cpu_ms_per_host: number;
  load_average_1m: { start: number };
  profile_top?: unknown;
}

export interface FleetSummary {
  fleet: string;
  go_hosts_per_min: number | null;
  ours_hosts_per_min: number | null;
  /** Ours / Go with the bash + jq helper. */
  ratio_hosts_per_min: number | null;
  go_hosts_per_min_compiled: number | null;
  ours_hosts_per_min_compiled: number | null;
  /** Ours / Go with the compiled helper. */
  ratio_hosts_per_min_compiled: number | null;
  go_cpu_ms_per_host: number | null;
  ours_cpu_ms_per_host: number | null;
  /** The highest 1-minute load average at the start of this fleet's runs. */
  max_start_load: number | null;
  /** Why a ratio is null although both sides ran, per helper. */
  not_comparable?: string[];
}

const SIDE_NAME: Record<Side, string> = { go: "Go's", ours: "ours'" };

/** A side's best run on a fleet with a helper: complete runs first, then the most hosts/min. Profiled runs are not measured runs. */
export function best<R extends ComparableRun>(runs: readonly R[], side: Side, fleet: string, helper: HelperKind = "bash"): R | undefined {
  return runs
    .filter((r) => r.side === side && r.fleet === fleet && r.helper === helper && r.profile_top === undefined)
    .sort((a, b) => Number(b.complete) - Number(a.complete) || b.hosts_per_min - a.hosts_per_min)[0];
}

/** Why two runs cannot be compared, or undefined when they can. */
export function comparability(go: ComparableRun, ours: ComparableRun, cores: number): string | undefined {
  const busy = [go, ours].filter((r) => r.load_average_1m.start > cores);
  if (busy.length > 0) {
    return `${busy.map((r) => `${SIDE_NAME[r.side]} run started at load ${r.load_average_1m.start}`).join(", ")} on ${cores} cores: the machine was busy with other work, no ratio`;
  }
  const unfinished = [go, ours].filter((r) => !r.complete);
  if (unfinished.length > 0) {
    return `${unfinished.map((r) => `${SIDE_NAME[r.side]} run restarted ${r.restarted}/${r.nodes}`).join(", ")}: not comparable, a ratio needs two runs that both finished`;
  }
  return undefined;
}

export function summarise(runs: readonly ComparableRun[], cores: number): FleetSummary[] {
  const fleets = [...new Set(runs.map((r) => r.fleet))];
  return fleets.map((fleet) => {
    const reasons: string[] = [];
    const ratio = (helper: HelperKind) => {
      const go = best(runs, "go", fleet, helper);
      const ours = best(runs, "ours", fleet, helper);
      if (!go || !ours) return { go, ours, ratio: null };
      const why = comparability(go, ours, cores);
      if (why) reasons.push(`${helper} helper: ${why}`);
      return { go, ours, ratio: why || go.hosts_per_min <= 0 ? null : round2(ours.hosts_per_min / go.hosts_per_min) };
    };
    const bash = ratio("bash");
    const compiled = ratio("compiled");
    const starts = runs.filter((r) => r.fleet === fleet).map((r) => r.load_average_1m.start);
    return {
      fleet,
      go_hosts_per_min: bash.go?.hosts_per_min ?? null,
      ours_hosts_per_min: bash.ours?.hosts_per_min ?? null,
      ratio_hosts_per_min: bash.ratio,
      go_hosts_per_min_compiled: compiled.go?.hosts_per_min ?? null,
      ours_hosts_per_min_compiled: compiled.ours?.hosts_per_min ?? null,
      ratio_hosts_per_min_compiled: compiled.ratio,
      go_cpu_ms_per_host: bash.go?.cpu_ms_per_host ?? null,
      ours_cpu_ms_per_host: bash.ours?.cpu_ms_per_host ?? null,
      max_start_load: starts.length > 0 ? Math.max(...starts) : null,
      ...(reasons.length > 0 ? { not_comparable: reasons } : {}),
    };
  });
}
