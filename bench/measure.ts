/**
 * Measuring helpers the benchmarks share: a process's CPU and memory from /proc, percentiles, a
 * V8 CPU profile's top self time, and timed round trips.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Linux USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
export const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcStat {
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
}

/** CPU ticks of a process (and of its reaped children); undefined once it is gone. */
export function procStat(pid: number | "self"): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    // Fields after the command: state is index 0, so utime (14th overall) is index 11.
    return { utime: Number(fields[11]), stime: Number(fields[12]), cutime: Number(fields[13]), cstime: Number(fields[14]) };
  } catch {
    return undefined;
  }
}

/** The pids of the processes whose parent is `pid` (a scan of /proc). */
export function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the command: state, then ppid.
      if (Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]) === pid) children.push(Number(entry));
    } catch {
      // Gone while the scan ran.
    }
  }
  return children;
}

/** The ticks of several processes together (each one's own and its reaped children's). */
export function sumStats(stats: ReadonlyArray<ProcStat | undefined>): ProcStat {
  const sum = { utime: 0, stime: 0, cutime: 0, cstime: 0 };
  for (const stat of stats) {
    if (!stat) continue;
    sum.utime += stat.utime;
    sum.stime += stat.stime;
    sum.cutime += stat.cutime;
    sum.cstime += stat.cstime;
  }
  return sum;
}

/** CPU seconds of the process itself, or (children) of its reaped children. */
export const cpuSeconds = (stat: ProcStat | undefined, children = false) =>
  stat ? (children ? stat.cutime + stat.cstime : stat.utime + stat.stime) / CLOCK_TICKS_PER_SECOND : 0;

/** A `/proc/<pid>/status` figure in bytes (VmRSS, VmHWM), 0 when the process is gone. */
export function procMemory(pid: number | "self" | undefined, field: "VmRSS" | "VmHWM"): number {
  if (pid === undefined) return 0;
  try {
    const match = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`${field}:\\s+(\\d+) kB`));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Two decimals, as the reports print figures. */
export const round2 = (value: number) => Math.round(value * 100) / 100;

/** The median of a list (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Nearest-rank percentile of an ascending list. */
export function percentile(sorted: number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }>;
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileEntry {
  function: string;
  location: string;
  self_ms: number;
  self_percent: number;
}

/** Self time per function (summed over every node of the same function), top `count`. */
export function summariseProfile(profile: CpuProfile, count: number): ProfileEntry[] {
  const byNode = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<string, { fn: string; location: string; us: number }>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let totalUs = 0;
  for (let i = 0; i < samples.length; i++) {
    const node = byNode.get(samples[i] as number);
    const delta = deltas[i] ?? 0;
    if (!node) continue;
    totalUs += delta;
    const { functionName, url, lineNumber } = node.callFrame;
    const location = `${url.replace(/^file:\/\//, "").replace(process.cwd() + "/", "")}:${lineNumber + 1}`;
    const key = `${functionName}@${location}`;
    const entry = selfUs.get(key) ?? { fn: functionName || "(anonymous)", location, us: 0 };
    entry.us += delta;
    selfUs.set(key, entry);
  }
  return [...selfUs.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, count)
    .map((entry) => ({
      function: entry.fn,
      location: entry.location,
      self_ms: Math.round(entry.us / 1000),
      self_percent: Math.round((entry.us / Math.max(1, totalUs)) * 1000) / 10,
    }));
}

export interface RoundTrips {
  calls: number;
  seconds: number;
  perSecond: number;
  failures: number;
}

/**
 * `calls` calls of `call` (given 0, 1, ...) with `inFlight` at a time, 1 being one after another,
 * timed. A failed call is counted and the next made, so one slow or lost reply does not end the
 * measurement; each call is bounded by its own timeout.
 */
export async function roundTrips(call: (index: number) => Promise<unknown>, calls: number, inFlight: number): Promise<RoundTrips> {
  let next = 0;
  let failures = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        const index = next++;
        await call(index).catch(() => (failures += 1));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { calls, seconds, perSecond: calls / seconds, failures };
}
