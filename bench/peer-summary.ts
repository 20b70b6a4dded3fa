/**
 * The rules of bench/peer.ts's pairs, and the per-fleet summary of reports/peer.json. Pure, so the
 * rules are tested without starting a fleet:
 * - a pair is one Go run and one ours run on the same fleet size, helper and config, run back to
 *   back, alternately Go first and ours first (ABBA), so drift on the machine falls on both sides;
 *   its ratio is ours' hosts/min over Go's;
 * - a pair is REFUSED (and run again, a bounded number of times) when either run started with the
 *   1-minute load above the gate or the CPU steal over either run passed its bound: other work on
 *   the machine or the hypervisor then decided the ratio more than the provisioners did;
 * - a pair where either side did not restart every node is not counted: a run stopped at its bound
 *   measured the hosts it reached, not the fleet;
 * - a fleet's ratio is the median over its counted pairs, given only from 3 of them.
 */
import { median, round2 } from "./measure";

export type Side = "go" | "ours";
export type HelperKind = "bash" | "compiled";
/** "default": the product's defaults for ours; "tuned": the CxW given with --tuned. */
export type OursConfig = "default" | "tuned";
export type PairOrder = "go-first" | "ours-first";

/** Fewer counted pairs than this and a median is not given. */
export const MIN_PAIRS_FOR_MEDIAN = 3;

/** What the rules read of one run. */
export interface PairedRun {
  nodes: number;
  restarted: number;
  complete: boolean;
  hosts_per_min: number;
  start_load: number;
  steal_pct: number;
  admission_to_restart_ms: { p99?: number };
  discovery_to_restart_ms: { p99?: number };
}

export interface PairGates {
  maxStartLoad: number;
  maxSteal: number;
}

export interface Pair {
  fleet: string;
  nodes: number;
  helper: HelperKind;
  config: OursConfig;
  /** 1-based slot; a refused pair is run again in the same slot. */
  slot: number;
  attempt: number;
  order: PairOrder;
  ratio: number | null;
  go_hosts_per_min: number;
  ours_hosts_per_min: number;
  /** The higher of the two runs' 1-minute load at their start. */
  start_load: number;
  /** The higher of the two runs' CPU steal % over the run. */
  steal_pct: number;
  go_p99_admission_ms: number | null;
  ours_p99_admission_ms: number | null;
  go_p99_discovery_ms: number | null;
  ours_p99_discovery_ms: number | null;
  ours_p99_discovery_below_go: boolean | null;
  go_complete: boolean;
  ours_complete: boolean;
  counted: boolean;
  /** Why the pair was refused by a gate (it was run again unless its slot ran out of attempts). */
  refused?: string;
  /** Why a pair that passed the gates is not counted. */
  not_counted?: string;
}

/** ABBA: the first pair runs Go first, the second ours first, and so on. */
export const orderOf = (slot: number): PairOrder => (slot % 2 === 1 ? "go-first" : "ours-first");

/** Why the gates refuse a pair, or undefined when they pass it. */
export function refusal(go: PairedRun, ours: PairedRun, gates: PairGates): string | undefined {
  const reasons: string[] = [];
  for (const [name, run] of [["Go's", go], ["ours'", ours]] as const) {
    if (run.start_load > gates.maxStartLoad) reasons.push(`${name} run started at load ${run.start_load} (gate ${gates.maxStartLoad})`);
    if (run.steal_pct > gates.maxSteal) reasons.push(`CPU steal ${run.steal_pct} % over ${name} run (bound ${gates.maxSteal} %)`);
  }
  return reasons.length > 0 ? reasons.join(", ") : undefined;
}

/** Why a pair that passed the gates is not counted, or undefined when it is. */
export function notCounted(go: PairedRun, ours: PairedRun): string | undefined {
  const unfinished = [["Go's", go], ["ours'", ours]].filter(([, run]) => !(run as PairedRun).complete) as Array<[string, PairedRun]>;
  if (unfinished.length === 0) return undefined;
  return `${unfinished.map(([name, run]) => `${name} run restarted ${run.restarted}/${run.nodes}`).join(", ")}: a ratio needs two runs that both restarted every node`;
}

const p99 = (figure: { p99?: number }) => figure.p99 ?? null;

/** One pair's record from its two runs. */
export function pairOf(
  where: { fleet: string; helper: HelperKind; config: OursConfig; slot: number; attempt: number },
  go: PairedRun,
  ours: PairedRun,
  gates: PairGates,
): Pair {
  const refused = refusal(go, ours, gates);
  const unfinished = refused ? undefined : notCounted(go, ours);
  const goDiscovery = p99(go.discovery_to_restart_ms);
  const oursDiscovery = p99(ours.discovery_to_restart_ms);
  return {
    ...where,
    nodes: go.nodes,
    order: orderOf(where.slot),
    ratio: go.hosts_per_min > 0 ? round2(ours.hosts_per_min / go.hosts_per_min) : null,
    go_hosts_per_min: go.hosts_per_min,
    ours_hosts_per_min: ours.hosts_per_min,
    start_load: Math.max(go.start_load, ours.start_load),
    steal_pct: Math.max(go.steal_pct, ours.steal_pct),
    go_p99_admission_ms: p99(go.admission_to_restart_ms),
    ours_p99_admission_ms: p99(ours.admission_to_restart_ms),
    go_p99_discovery_ms: goDiscovery,
    ours_p99_discovery_ms: oursDiscovery,
    ours_p99_discovery_below_go: goDiscovery === null || oursDiscovery === null ? null : oursDiscovery < goDiscovery,
    go_complete: go.complete,
    ours_complete: ours.complete,
    counted: refused === undefined && unfinished === undefined && go.hosts_per_min > 0,
    ...(refused ? { refused } : {}),
    ...(unfinished ? { not_counted: unfinished } : {}),
  };
}

export interface MedianRatio {
  median: number | null;
  min: number | null;
  max: number | null;
  counted: number;
  /** Why the median is null. */
  reason?: string;
}

/** The median ratio over the counted pairs of one helper and config, with its spread. */
export function medianRatio(pairs: readonly Pair[], helper: HelperKind, config: OursConfig): MedianRatio {
  const ratios = pairs.filter((p) => p.helper === helper && p.config === config && p.counted && p.ratio !== null).map((p) => p.ratio as number);
  if (ratios.length < MIN_PAIRS_FOR_MEDIAN) {
    const asked = pairs.filter((p) => p.helper === helper && p.config === config).length;
    if (asked === 0) return { median: null, min: null, max: null, counted: 0, reason: "not run" };
    return { median: null, min: null, max: null, counted: ratios.length, reason: `${ratios.length} counted pair(s) of ${asked} run (refused or incomplete pairs are not counted); a median needs ${MIN_PAIRS_FOR_MEDIAN}` };
  }
  return { median: round2(median(ratios) as number), min: Math.min(...ratios), max: Math.max(...ratios), counted: ratios.length };
}

export interface FleetSummary {
  fleet: string;
  /** Ours / Go with the bash + jq helper, default config. */
  median_ratio_hosts_per_min: number | null;
  median_ratio_hosts_per_min_compiled: number | null;
  spread: { bash: MedianRatio; compiled: MedianRatio };
  tuned_median_ratio_hosts_per_min?: number | null;
  tuned_median_ratio_hosts_per_min_compiled?: number | null;
  tuned_spread?: { bash: MedianRatio; compiled: MedianRatio };
  /** Ours with the compiled helper, default config: the worst p99 from discovery over its counted pairs. */
  p99_from_discovery_ms: number | null;
  /** Ours' p99 from discovery below Go's in every counted compiled default pair (false when there is none). */
  p99_below_go_every_pair: boolean;
  /** Over every run of the counted pairs. */
  every_host_restarted: boolean;
  max_start_load: number | null;
  /** Pair slots left refused after their last attempt. */
  slots_left_refused: number;
  pairs: Pair[];
}

export function summariseFleet(fleet: string, pairs: readonly Pair[]): FleetSummary {
  const bash = medianRatio(pairs, "bash", "default");
  const compiled = medianRatio(pairs, "compiled", "default");
  const tunedRun = pairs.some((p) => p.config === "tuned");
  const tuned = tunedRun ? { bash: medianRatio(pairs, "bash", "tuned"), compiled: medianRatio(pairs, "compiled", "tuned") } : undefined;
  const counted = pairs.filter((p) => p.counted);
  const headline = counted.filter((p) => p.helper === "compiled" && p.config === "default");
  const discovery = headline.map((p) => p.ours_p99_discovery_ms).filter((ms): ms is number => ms !== null);
  const slots = new Map<string, boolean>();
  for (const p of pairs) slots.set(`${p.helper}/${p.config}/${p.slot}`, p.refused !== undefined);
  return {
    fleet,
    median_ratio_hosts_per_min: bash.median,
    median_ratio_hosts_per_min_compiled: compiled.median,
    spread: { bash, compiled },
    ...(tuned
      ? { tuned_median_ratio_hosts_per_min: tuned.bash.median, tuned_median_ratio_hosts_per_min_compiled: tuned.compiled.median, tuned_spread: tuned }
      : {}),
    p99_from_discovery_ms: discovery.length > 0 ? Math.max(...discovery) : null,
    p99_below_go_every_pair: headline.length > 0 && headline.every((p) => p.ours_p99_discovery_below_go === true),
    every_host_restarted: counted.length > 0 && counted.every((p) => p.go_complete && p.ours_complete),
    max_start_load: pairs.length > 0 ? Math.max(...pairs.map((p) => p.start_load)) : null,
    slots_left_refused: [...slots.values()].filter(Boolean).length,
    pairs: [...pairs],
  };
}

export function summarise(pairs: readonly Pair[]): FleetSummary[] {
  const fleets = [...new Set(pairs.map((p) => p.fleet))];
  return fleets.map((fleet) => summariseFleet(fleet, pairs.filter((p) => p.fleet === fleet)));
}
