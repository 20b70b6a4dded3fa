/**
 * Per-run figures of bench/peer.ts computed from timestamps: the admission timeline and its longest
 * gap, latency from discovery, and CPU steal from /proc/stat. Pure, so they are tested without a
 * fleet.
 */
import { percentile } from "./measure";

export interface Percentiles {
  p50?: number;
  p99?: number;
  max?: number;
  samples: number;
}

export function percentiles(values: readonly number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1), samples: sorted.length };
}

/** The "cpu" line of /proc/stat: steal ticks and all ticks. */
export interface CpuTicks {
  steal: number;
  total: number;
}

export function parseCpuTicks(procStat: string): CpuTicks {
  const line = procStat.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new Error("/proc/stat has no cpu line");
  // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user.
  const fields = line.trim().split(/\s+/).slice(1, 9).map(Number);
  return { steal: fields[7] ?? 0, total: fields.reduce((sum, value) => sum + value, 0) };
}

/** Steal as a % of all CPU time between two readings. */
export function stealPercent(before: CpuTicks, after: CpuTicks): number {
  const total = after.total - before.total;
  return total > 0 ? Math.round(((after.steal - before.steal) / total) * 10_000) / 100 : 0;
}

/** First admissions per whole second from `origin` (index 0 is the first second). */
export function admissionTimeline(firstAdmissions: readonly number[], origin: number): number[] {
  const counts: number[] = [];
  for (const at of firstAdmissions) {
    const second = Math.max(0, Math.floor((at - origin) / 1000));
    while (counts.length <= second) counts.push(0);
    counts[second] = (counts[second] ?? 0) + 1;
  }
  return counts;
}

/**
 * The longest time (s) between consecutive admissions while some discovered host was not yet
 * admitted: from the first discovery to the first admission, between admissions, and, when the run
 * ended with discovered hosts unadmitted, from the last admission to the run's end. Every node of
 * the fleet answers the first discovery, so all `hosts` count as discovered from then on.
 */
export function longestAdmissionGapS(firstAdmissions: readonly number[], hosts: number, firstDiscoveryAt: number | undefined, endAt: number): number {
  const times = [...firstAdmissions].sort((a, b) => a - b);
  const marks = [...(firstDiscoveryAt === undefined ? [] : [firstDiscoveryAt]), ...times];
  if (times.length < hosts) marks.push(endAt);
  let longest = 0;
  for (let i = 1; i < marks.length; i++) longest = Math.max(longest, (marks[i] as number) - (marks[i - 1] as number));
  return Math.round(longest) / 1000;
}

/** How a host was admitted: ours' host-work message says; Go always admits from discovery. */
export interface Admission {
  at: number;
  source?: string;
}

/**
 * Per restarted host, its restart time minus the first discovery broadcast at or before its first
 * admission: the discovery that found it (every node of the fleet answers every broadcast, so a host
 * left waiting past a discovery, or admitted again, is measured from the first one, as Go's hosts
 * are). A host first admitted from a startup event ("lifecycle") is measured from the fleet's start,
 * when the nodes published it.
 */
export function discoveryToRestart(
  restartedAt: ReadonlyMap<string, number>,
  admissions: ReadonlyMap<string, readonly Admission[]>,
  discoveries: readonly number[],
  fleetStartedAt: number,
): number[] {
  const firstBroadcast = Math.min(...discoveries);
  const latencies: number[] = [];
  for (const [identity, restart] of restartedAt) {
    const first = (admissions.get(identity) ?? []).filter((a) => a.at <= restart).sort((a, b) => a.at - b.at)[0];
    if (!first) continue;
    const from = first.source === "lifecycle" ? fleetStartedAt : firstBroadcast <= first.at ? firstBroadcast : undefined;
    if (from !== undefined) latencies.push(restart - from);
  }
  return latencies;
}
