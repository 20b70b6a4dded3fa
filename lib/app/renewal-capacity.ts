/**
 * Whether renewal can renew every provisioned host before its credentials expire, and if not by how
 * much (docs/renewal.md, "Capacity"). Pure: the fleet's expiries, the time and the settings in,
 * figures out; status shows them and the `renew` run emits them as gauges.
 *
 * The model is scheduling unit jobs with release times and deadlines. The `renew` function runs
 * once a minute (a tick), and each run may send up to the sustained rate: min(renew.rate,
 * renew.max_in_flight / renew.timeout in minutes) (lib/config/renew-capacity.ts says why the
 * in-flight bound is taken at its worst). Host i may be sent from the run at or after
 * `renewableAt(i)` (now, if that has passed) and must be sent by `expiresAt - renew.timeout`, so that
 * it is back before its credentials stop working. Renewal sends the hosts due soonest expiry first,
 * which with one timeout for all is earliest deadline first (EDF), and EDF misses no deadline that
 * any order could meet; so simulating it says exactly whether the rate keeps up. The smallest rate
 * that does is found by searching up from the densest interval seen from either end of the schedule.
 */
import type { HostExpiry } from "../admission/site-listing";
import { ASSUMED_OUT_OF_SERVICE_MS, RENEW_RUN_MS, sustainedRenewRate, type SustainedRenewRate } from "../config/renew-capacity";
import { InvalidRenewalSettingsError } from "../errors";
import { atRisk, measuredOutOfServiceMs, renewableAt, renewalApplies, type RenewBefore } from "./renewal-state";
import { type RenewalState } from "./use-case-ports";

export interface RenewalCapacitySettings {
  before: RenewBefore;
  ratePerMinute: number;
  maxInFlight: number;
  timeoutMs: number;
  /** How long a renewed host holds its place in flight: measured by renewal, or ASSUMED_OUT_OF_SERVICE_MS. */
  outOfServiceMs: number;
}

/** What the capacity check works from: the renew settings, and how long renewed hosts held their place as renewal measured it. */
export function capacitySettings(settings: Omit<RenewalCapacitySettings, "outOfServiceMs">, state: Pick<RenewalState, "recent">): RenewalCapacitySettings {
  const { before, ratePerMinute, maxInFlight, timeoutMs } = settings;
  return { before, ratePerMinute, maxInFlight, timeoutMs, outOfServiceMs: measuredOutOfServiceMs(state.recent) ?? ASSUMED_OUT_OF_SERVICE_MS };
}

export interface RenewalCapacity {
  /** Every host to renew is sent by its send-by instant at the sustained rate. */
  canKeepUp: boolean;
  /** Provisioned hosts not expired yet and not in flight: what the schedule has to send. */
  hostsToRenew: number;
  /** Sends a minute renewal sustains: min(renew.rate, renew.max_in_flight / minutes a host holds its place). */
  ratePerMinute: number;
  limitedBy: SustainedRenewRate["limitedBy"];
  /** The smallest whole number of sends a minute that renews every host that can be renewed in time at all; 0 with none. */
  requiredRatePerMinute: number;
  /** The renew.max_in_flight that sustains `requiredRatePerMinute` with hosts holding their place `outOfServiceMs`. */
  requiredMaxInFlight: number;
  /** Sends a minute missing (`requiredRatePerMinute - ratePerMinute`, rounded up to hundredths); 0 when it keeps up. The shortfall gauge. */
  shortfallPerMinute: number;
  /** Hosts that would not be sent by their send-by instant: behind the rate, or out of reach. */
  hostsThatWouldExpire: number;
  /** Hosts no rate renews in time: the send-by instant is before the run their window lets them go (or has passed). */
  hostsOutOfReach: number;
  /** The earliest send-by instant (`expiresAt - renew.timeout`, epoch ms) missed, and whose it is. */
  firstMissAt?: number;
  firstMissIdentity?: string;
  /** Provisioned hosts, in flight or not, that are not expired and in the last quarter of their renewal window. The at-risk gauge. */
  hostsAtRisk: number;
}

/**
 * The capacity of renewal for `hosts` at `now`. Hosts in `inFlight` were sent already and are not
 * sent again (they count towards hosts at risk until they are back). Linear in the hosts (radix
 * sorts of whole ticks) plus a heap over distinct deadlines for each rate tried, and the search
 * tries few: about 30 ms for 100,000 hosts.
 */
export function renewalCapacity(hosts: readonly HostExpiry[], now: number, settings: RenewalCapacitySettings, inFlight: ReadonlySet<string> = new Set()): RenewalCapacity {
  checkSettings(settings);
  const jobs = jobsOf(hosts, now, settings, inFlight);
  const rate = sustainedRenewRate(settings);
  const perTick = tickRate(rate);
  const atRate = edf(jobs, perTick);
  const required = requiredRate(jobs, perTick.per === 1 ? new Map([[perTick.sends, atRate.missed === 0]]) : new Map());
  const missedAtRate = atRate.firstMissRank === undefined ? [] : jobs.hosts.filter((_host, job) => jobs.rank[job] === atRate.firstMissRank);
  const firstMiss = earliestSendBy([...missedAtRate, ...jobs.outOfReach], settings);
  const hostsThatWouldExpire = atRate.missed + jobs.outOfReach.length;
  const canKeepUp = hostsThatWouldExpire === 0;
  return {
    canKeepUp,
    hostsToRenew: jobs.hosts.length + jobs.outOfReach.length,
    ratePerMinute: rate.perMinute,
    limitedBy: rate.limitedBy,
    requiredRatePerMinute: required,
    requiredMaxInFlight: Math.ceil((required * settings.outOfServiceMs) / RENEW_RUN_MS),
    // A fractional sustained rate (the in-flight bound) may still keep up below the whole required rate.
    shortfallPerMinute: canKeepUp ? 0 : Math.max(0, Math.ceil((required - rate.perMinute) * 100) / 100),
    hostsThatWouldExpire,
    hostsOutOfReach: jobs.outOfReach.length,
    ...(firstMiss ? { firstMissAt: sendBy(firstMiss, settings), firstMissIdentity: firstMiss.identity } : {}),
    hostsAtRisk: hostsAtRisk(hosts, settings.before, now),
  };
}

/**
 * Provisioned hosts not expired yet in the last quarter of their renewal window (renewal-state's
 * `atRisk`): hosts are placed in the first half, so one still there is late by a quarter of its
 * window, and the alarm on it fires while there is time left to act, before the first host expires.
 */
function hostsAtRisk(hosts: readonly HostExpiry[], before: RenewBefore, now: number): number {
  let count = 0;
  for (const host of hosts) if (atRisk(host, before, now)) count++;
  return count;
}

function checkSettings({ ratePerMinute, maxInFlight, timeoutMs, before }: RenewalCapacitySettings): void {
  const lead = "ms" in before ? before.ms : before.fraction;
  for (const [name, value] of [["ratePerMinute", ratePerMinute], ["maxInFlight", maxInFlight], ["timeoutMs", timeoutMs], ["before", lead]] as const) {
    if (!(Number.isFinite(value) && value > 0)) throw new InvalidRenewalSettingsError(`renewal capacity needs a positive ${name}, got ${value}`);
  }
}

const sendBy = (host: HostExpiry, settings: RenewalCapacitySettings) => host.credentials.expiresAt - settings.timeoutMs;

/**
 * The hosts to send as jobs on ticks (renew runs, 0 = now), in typed arrays indexed by job. Jobs of
 * one deadline tick share a rank (ranks follow deadlines), so EDF keeps one entry per deadline
 * pending, not one per host: hosts provisioned together share a handful of deadlines.
 */
interface Jobs {
  hosts: HostExpiry[];
  release: Int32Array;
  /** Job indices, earliest release first. */
  byRelease: Int32Array;
  rank: Int32Array;
  /** Per rank: its deadline tick, and how many jobs have it. */
  rankDeadline: Int32Array;
  rankJobs: Int32Array;
  /** Hosts whose deadline comes before their release: no rate renews them in time. */
  outOfReach: HostExpiry[];
}

function jobsOf(hosts: readonly HostExpiry[], now: number, settings: RenewalCapacitySettings, inFlight: ReadonlySet<string>): Jobs {
  const reachable: HostExpiry[] = [];
  const outOfReach: HostExpiry[] = [];
  // Typed arrays filled by index: TypedArray.from with a mapping function is many times slower.
  const releases = new Int32Array(hosts.length);
  const deadlines = new Int32Array(hosts.length);
  for (const host of hosts) {
    if (!renewalApplies(host) || host.credentials.expiresAt <= now || inFlight.has(host.identity)) continue;
    // The first run at or after the window opens for it; the last run that still leaves renew.timeout.
    const first = Math.max(0, Math.ceil((renewableAt(host, settings.before) - now) / RENEW_RUN_MS));
    const last = Math.floor((sendBy(host, settings) - now) / RENEW_RUN_MS);
    if (last < first) {
      outOfReach.push(host);
      continue;
    }
    releases[reachable.length] = first;
    deadlines[reachable.length] = last;
    reachable.push(host);
  }
  const release = releases.subarray(0, reachable.length);
  const deadline = deadlines.subarray(0, reachable.length);
  return { hosts: reachable, release, byRelease: orderOf(release), ...ranksOf(deadline), outOfReach };
}

/** Ranks of the deadlines: 0 for the earliest tick, one more for each later distinct tick. */
function ranksOf(deadline: Int32Array): Pick<Jobs, "rank" | "rankDeadline" | "rankJobs"> {
  const rank = new Int32Array(deadline.length);
  const rankDeadline = new Int32Array(deadline.length);
  const rankJobs = new Int32Array(deadline.length);
  let ranks = 0;
  for (const job of orderOf(deadline)) {
    const tick = deadline[job] as number;
    if (ranks === 0 || rankDeadline[ranks - 1] !== tick) rankDeadline[ranks++] = tick;
    rank[job] = ranks - 1;
    rankJobs[ranks - 1] = (rankJobs[ranks - 1] as number) + 1;
  }
  return { rank, rankDeadline: rankDeadline.subarray(0, ranks), rankJobs: rankJobs.subarray(0, ranks) };
}

const RADIX_BITS = 16;
const RADIX = 1 << RADIX_BITS;

/**
 * Below this many jobs a comparison sort is faster: each radix pass walks all 65,536 buckets
 * whatever the number of keys, which made a site of ten hosts pay for a hundred thousand.
 */
const RADIX_FROM = 4_096;

/**
 * The indices of `keys` (ticks: whole, not negative) in ascending key order, stable. Two counting
 * passes of 16 bits each (LSD radix sort): linear, where a comparison sort of 100,000 jobs alone
 * took most of the time budget.
 */
function orderOf(keys: Int32Array): Int32Array {
  let order = new Int32Array(keys.length);
  for (let index = 0; index < keys.length; index++) order[index] = index;
  if (keys.length < RADIX_FROM) return order.sort((a, b) => (keys[a] as number) - (keys[b] as number) || a - b);
  let spare = new Int32Array(keys.length);
  const counts = new Int32Array(RADIX + 1);
  for (let shift = 0; shift < 32; shift += RADIX_BITS) {
    counts.fill(0);
    for (const key of keys) {
      const digit = ((key >>> shift) & (RADIX - 1)) + 1;
      counts[digit] = (counts[digit] as number) + 1;
    }
    for (let digit = 1; digit <= RADIX; digit++) counts[digit] = (counts[digit] as number) + (counts[digit - 1] as number);
    for (const index of order) {
      const digit = ((keys[index] as number) >>> shift) & (RADIX - 1);
      const at = counts[digit] as number;
      spare[at] = index;
      counts[digit] = at + 1;
    }
    const sorted = spare;
    spare = order;
    order = sorted;
  }
  return order;
}

/** `sends` every `per` ticks (a fraction, so the in-flight bound, 50 per 15 minutes, stays exact). */
interface TickRate {
  sends: number;
  per: number;
}

/** The fraction in lowest terms: an integer rate becomes `rate / 1`, which the search's results are keyed by. */
function tickRate(rate: SustainedRenewRate): TickRate {
  const sends = rate.sends * RENEW_RUN_MS;
  const per = rate.everyMs;
  let [a, b] = [sends, per];
  while (b > 0 && Number.isInteger(a) && Number.isInteger(b)) [a, b] = [b, a % b];
  return b === 0 && a > 0 ? { sends: sends / a, per: per / a } : { sends, per };
}

/** Sends allowed in ticks 0..tick-1 together: the floor of the rate times the ticks. */
const sentBefore = (rate: TickRate, tick: number) => Math.floor((rate.sends * tick) / rate.per);

interface EdfOutcome {
  missed: number;
  /** The earliest deadline rank that missed jobs. */
  firstMissRank?: number;
}

/**
 * Earliest deadline first at `rate`: each tick sends the pending jobs of the nearest deadline. Jobs
 * whose deadline passed before they were sent are missed and dropped (renewal itself would still
 * send such a host before its expiry, taking a send from a later one, so the count is a lower
 * bound). Ticks with nothing pending or no send allowed are skipped, so each step sends or drops.
 */
function edf(jobs: Jobs, rate: TickRate): EdfOutcome {
  const count = jobs.hosts.length;
  const pending = new Int32Array(jobs.rankJobs.length);
  const heap = new MinHeap(jobs.rankJobs.length);
  let next = 0;
  let tick = 0;
  let missed = 0;
  let firstMissRank: number | undefined;
  while (next < count || heap.size > 0) {
    if (heap.size === 0) tick = Math.max(tick, jobs.release[jobs.byRelease[next] as number] as number);
    let allowed = sentBefore(rate, tick + 1) - sentBefore(rate, tick);
    if (allowed === 0) {
      // On to the first tick whose cumulative allowance passes the current one (a later one if
      // rounding says otherwise: a tick with none allowed only takes arrivals, and the loop moves on).
      tick = Math.max(tick + 1, Math.ceil(((sentBefore(rate, tick) + 1) * rate.per) / rate.sends) - 1);
      allowed = sentBefore(rate, tick + 1) - sentBefore(rate, tick);
    }
    for (; next < count && (jobs.release[jobs.byRelease[next] as number] as number) <= tick; next++) {
      const rank = jobs.rank[jobs.byRelease[next] as number] as number;
      if (pending[rank] === 0) heap.push(rank);
      pending[rank] = (pending[rank] as number) + 1;
    }
    while (allowed > 0 && heap.size > 0) {
      const rank = heap.peek();
      const waiting = pending[rank] as number;
      const taken = (jobs.rankDeadline[rank] as number) < tick ? 0 : Math.min(allowed, waiting);
      if (taken === 0) {
        missed += waiting;
        firstMissRank = Math.min(firstMissRank ?? rank, rank);
      }
      allowed -= taken;
      pending[rank] = taken === 0 ? 0 : waiting - taken;
      if (pending[rank] === 0) heap.pop();
    }
    tick++;
  }
  return { missed, ...(firstMissRank === undefined ? {} : { firstMissRank }) };
}

/** Of hosts that would miss, the one whose send-by instant comes first. */
function earliestSendBy(hosts: readonly HostExpiry[], settings: RenewalCapacitySettings): HostExpiry | undefined {
  let first: HostExpiry | undefined;
  for (const host of hosts) if (first === undefined || sendBy(host, settings) < sendBy(first, settings)) first = host;
  return first;
}

/**
 * The smallest whole sends a minute at which EDF misses nothing. Feasibility only grows with the
 * rate, so: start at a bound no schedule can beat (the densest interval that starts at the first
 * release or ends at the last deadline), double until it holds, then bisect. `count` a minute always
 * holds: every job is then sent at its release. `known` holds outcomes already simulated.
 */
function requiredRate(jobs: Jobs, known: ReadonlyMap<number, boolean>): number {
  const count = jobs.hosts.length;
  if (count === 0) return 0;
  const holds = (perTick: number) => known.get(perTick) ?? edf(jobs, { sends: perTick, per: 1 }).missed === 0;
  let failed = lowerBound(jobs) - 1;
  let held = Math.min(count, failed + 1);
  while (held < count && !holds(held)) {
    failed = held;
    held = Math.min(count, held * 2);
  }
  while (held - failed > 1) {
    const middle = Math.floor((failed + held) / 2);
    if (holds(middle)) held = middle;
    else failed = middle;
  }
  return held;
}

/** max over b of #(deadline <= b) / (b - first release + 1), and over a of #(release >= a) / (last deadline - a + 1), rounded up; at least 1. */
function lowerBound(jobs: Jobs): number {
  const count = jobs.hosts.length;
  const firstRelease = jobs.release[jobs.byRelease[0] as number] as number;
  const lastDeadline = jobs.rankDeadline[jobs.rankDeadline.length - 1] as number;
  let bound = 1;
  let upTo = 0;
  for (let rank = 0; rank < jobs.rankJobs.length; rank++) {
    upTo += jobs.rankJobs[rank] as number;
    bound = Math.max(bound, Math.ceil(upTo / ((jobs.rankDeadline[rank] as number) - firstRelease + 1)));
  }
  for (let index = 0; index < count; index++) {
    const release = jobs.release[jobs.byRelease[index] as number] as number;
    bound = Math.max(bound, Math.ceil((count - index) / (lastDeadline - release + 1)));
  }
  return bound;
}

/** A binary min-heap of whole numbers (deadline ranks) in a typed array. */
class MinHeap {
  size = 0;
  private readonly items: Int32Array;

  constructor(capacity: number) {
    this.items = new Int32Array(capacity);
  }

  peek(): number {
    return this.items[0] as number;
  }

  push(item: number): void {
    let at = this.size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if ((this.items[parent] as number) <= item) break;
      this.items[at] = this.items[parent] as number;
      at = parent;
    }
    this.items[at] = item;
  }

  pop(): void {
    const size = --this.size;
    const item = this.items[size] as number;
    let at = 0;
    for (let child = 1; child < size; child = 2 * at + 1) {
      if (child + 1 < size && (this.items[child + 1] as number) < (this.items[child] as number)) child++;
      if ((this.items[child] as number) >= item) break;
      this.items[at] = this.items[child] as number;
      at = child;
    }
    if (size > 0) this.items[at] = item;
  }
}
