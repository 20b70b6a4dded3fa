/**
 * When renewal may send (docs/renewal.md, "Change control"): inside a maintenance window
 * (`renew.windows`; none configured: always) and outside every freeze (`renew.freezes`). Each entry
 * is a cron expression read in an IANA timezone (through Intl, so daylight saving is the zone's own:
 * a local time skipped by a spring-forward does not occur that day, one repeated by a fall-back
 * occurs twice) and a duration from each time it fires. Time is cut into whole minutes, as the
 * `renew` runs (one a minute) see it; what is allowed is worked out a UTC day at a time and kept,
 * as sorted stretches: each entry's firings are listed from its cron's fields a local day at a time
 * (the zone's offset read at each end of a UTC day, and to the minute only across a change), so a
 * year's check at load is a few thousand steps, not half a million minutes.
 */
import { cronMatches, type CronSchedule } from "./cron";

export interface CalendarEntry {
  readonly cron: CronSchedule;
  readonly timezone: string;
  readonly durationMs: number;
  /** The duration as written, for the redacted view and messages. */
  readonly duration: string;
}

/** The longest stretch of minutes renewal may not send in, within what was looked at. */
export interface CalendarGap {
  ms: number;
  startsAt: number;
  endsAt: number;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** Days kept worked out; past this the cache starts again (a Lambda container lives for hours). */
const CACHED_DAYS = 1_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timezone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timezone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(timezone, formatter);
  }
  return formatter;
}

/** Whether Intl knows the IANA timezone (`Europe/London`, `UTC`). */
export function isTimeZone(timezone: string): boolean {
  try {
    formatterFor(timezone);
    return true;
  } catch {
    return false;
  }
}

/** The zone's offset from UTC at `at`, in ms (local wall time = at + offset). */
function offsetAt(timezone: string, at: number): number {
  const fields: Record<string, number> = {};
  for (const part of formatterFor(timezone).formatToParts(at)) if (part.type !== "literal") fields[part.type] = Number(part.value);
  const wall = Date.UTC(fields.year ?? 0, (fields.month ?? 1) - 1, fields.day ?? 1, fields.hour ?? 0, fields.minute ?? 0, fields.second ?? 0);
  return wall - Math.floor(at / 1_000) * 1_000;
}

/** The zone's offset at the start of each UTC day read so far, by zone (shared by every calendar of the process). */
const dayOffsets = new Map<string, Map<number, number>>();

function offsetAtStartOf(timezone: string, day: number): number {
  let days = dayOffsets.get(timezone);
  if (!days || days.size >= CACHED_DAYS) dayOffsets.set(timezone, (days = new Map()));
  let offset = days.get(day);
  if (offset === undefined) days.set(day, (offset = offsetAt(timezone, day * DAY_MS)));
  return offset;
}

/** A stretch of UTC time [from, to) over which the zone's offset does not change. */
interface Segment {
  from: number;
  to: number;
  offset: number;
}

/**
 * UTC day `day` cut where the zone's offset changes: its offset is read at the day's two ends, and
 * when they differ the minute of the change is found by halving (zones change at most once a day).
 */
function segmentsOf(timezone: string, day: number): Segment[] {
  const start = day * DAY_MS;
  const end = start + DAY_MS;
  const before = offsetAtStartOf(timezone, day);
  const after = offsetAtStartOf(timezone, day + 1);
  if (before === after) return [{ from: start, to: end, offset: before }];
  // offsetAt(low) is `before`, offsetAt(high) is not: the change comes in (low, high].
  let low = start;
  let high = end;
  while (high - low > MINUTE_MS) {
    const middle = low + Math.floor((high - low) / 2 / MINUTE_MS) * MINUTE_MS;
    if (offsetAt(timezone, middle) === before) low = middle;
    else high = middle;
  }
  return [
    { from: start, to: high, offset: before },
    { from: high, to: end, offset: offsetAt(timezone, high) },
  ];
}

/** The minutes of a day (hour * 60 + minute), in order, at which the schedule fires on a day it fires on. */
const timesOfDay = new WeakMap<CronSchedule, readonly number[]>();

function timesOf(cron: CronSchedule): readonly number[] {
  let times = timesOfDay.get(cron);
  if (!times) {
    const list: number[] = [];
    for (let hour = 0; hour < 24; hour++) for (let minute = 0; minute < 60; minute++) if (cron.hour[hour] && cron.minute[minute]) list.push(hour * 60 + minute);
    timesOfDay.set(cron, (times = list));
  }
  return times;
}

/**
 * The instants (epoch ms, whole minutes, in order) of UTC day `day` at which the entry's cron fires
 * in its timezone: for each stretch of one offset, each local day it covers that the cron's day
 * fields match, each time of day the cron names, as the UTC minute whose local time is then. A
 * local time a spring-forward skips falls in no stretch; one a fall-back repeats falls in both.
 */
function firingsOn(entry: CalendarEntry, day: number): number[] {
  const times = timesOf(entry.cron);
  const firings: number[] = [];
  if (times.length === 0) return firings;
  const first = times[0] as number;
  for (const { from, to, offset } of segmentsOf(entry.timezone, day)) {
    for (let local = Math.floor((from + offset) / DAY_MS); local <= Math.floor((to - 1 + offset) / DAY_MS); local++) {
      const date = new Date(local * DAY_MS);
      const fields = { minute: first % 60, hour: Math.floor(first / 60), day: date.getUTCDate(), month: date.getUTCMonth() + 1, weekday: date.getUTCDay() };
      // The first time of day matches by its hour and minute, so this asks whether the day does.
      if (!cronMatches(entry.cron, fields)) continue;
      for (const time of times) {
        // The UTC minute whose local wall time (at + offset, read to the minute) is this one.
        const at = Math.ceil((local * DAY_MS + time * MINUTE_MS - offset) / MINUTE_MS) * MINUTE_MS;
        if (at >= to) break;
        if (at >= from) firings.push(at);
      }
    }
  }
  return firings;
}

/** Sorted, disjoint stretches [start, end) as a flat list: start0, end0, start1, end1, … */
type Stretches = number[];

/** Adds [start, end) to stretches whose last start is not after `start`, joining it to the last when they touch. */
function append(stretches: Stretches, start: number, end: number): void {
  const last = stretches.length - 1;
  if (last > 0 && start <= (stretches[last] as number)) stretches[last] = Math.max(stretches[last] as number, end);
  else stretches.push(start, end);
}

function union(lists: readonly Stretches[]): Stretches {
  if (lists.length === 1) return lists[0] as Stretches;
  const pairs: Array<[number, number]> = [];
  for (const list of lists) for (let index = 0; index < list.length; index += 2) pairs.push([list[index] as number, list[index + 1] as number]);
  pairs.sort((a, b) => a[0] - b[0]);
  const joined: Stretches = [];
  for (const [start, end] of pairs) append(joined, start, end);
  return joined;
}

/** What of `kept` is outside every stretch of `removed`. */
function subtract(kept: Stretches, removed: Stretches): Stretches {
  const left: Stretches = [];
  let next = 0;
  for (let index = 0; index < kept.length; index += 2) {
    let start = kept[index] as number;
    const end = kept[index + 1] as number;
    while (next < removed.length && (removed[next + 1] as number) <= start) next += 2;
    for (let cut = next; cut < removed.length && (removed[cut] as number) < end; cut += 2) {
      if ((removed[cut] as number) > start) left.push(start, removed[cut] as number);
      start = Math.max(start, removed[cut + 1] as number);
    }
    if (start < end) left.push(start, end);
  }
  return left;
}

export class RenewCalendar {
  /** The stretches of each UTC day worked out so far in which renewal may send. */
  private readonly days = new Map<number, Stretches>();
  /** By entry (windows, then freezes): its firings on each UTC day worked out so far. */
  private readonly firings: Array<Map<number, number[]>>;

  constructor(
    readonly windows: readonly CalendarEntry[],
    readonly freezes: readonly CalendarEntry[],
  ) {
    this.firings = [...windows, ...freezes].map(() => new Map());
  }

  /** Whether windows or freezes restrict renewal at all. */
  get restricted(): boolean {
    return this.windows.length > 0 || this.freezes.length > 0;
  }

  allowedAt(at: number): boolean {
    if (!this.restricted) return true;
    const minute = Math.floor(at / MINUTE_MS) * MINUTE_MS;
    const stretches = this.stretchesOf(Math.floor(at / DAY_MS));
    for (let index = 0; index < stretches.length; index += 2) {
      if ((stretches[index] as number) > minute) return false;
      if ((stretches[index + 1] as number) > minute) return true;
    }
    return false;
  }

  /** `at` when renewal may send then, else the first allowed minute after it within `withinMs`; undefined when there is none. */
  nextAllowed(at: number, withinMs: number): number | undefined {
    if (this.allowedAt(at)) return at;
    const after = Math.floor(at / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
    for (let day = Math.floor(after / DAY_MS); day * DAY_MS <= at + withinMs; day++) {
      const stretches = this.stretchesOf(day);
      for (let index = 0; index < stretches.length; index += 2) {
        if ((stretches[index + 1] as number) <= after) continue;
        const allowed = Math.max(stretches[index] as number, after);
        return allowed <= at + withinMs ? allowed : undefined;
      }
    }
    return undefined;
  }

  /** `at` when renewal may not send then, else the first closed minute after it within `withinMs`; undefined when it stays open. */
  nextClosed(at: number, withinMs: number): number | undefined {
    if (!this.allowedAt(at)) return at;
    if (!this.restricted) return undefined;
    // The first minute after `at`'s not inside an allowed stretch; stretches cut at midnight run on.
    let minute = Math.floor(at / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
    for (let day = Math.floor(minute / DAY_MS); day * DAY_MS <= at + withinMs; day++) {
      const stretches = this.stretchesOf(day);
      for (let index = 0; index < stretches.length && (stretches[index] as number) <= minute; index += 2) {
        minute = Math.max(minute, stretches[index + 1] as number);
      }
      if (minute < (day + 1) * DAY_MS) break;
    }
    return minute <= at + withinMs ? minute : undefined;
  }

  /** The longest stretch in [from, to) in which renewal may not send; ms 0 when it may always. */
  longestGap(from: number, to: number): CalendarGap {
    const longest: CalendarGap = { ms: 0, startsAt: from, endsAt: from };
    const first = Math.floor(from / MINUTE_MS) * MINUTE_MS;
    if (!this.restricted || to < first) return longest;
    // Whole minutes from `first` are looked at; a closed stretch counts once a minute before `to` ends it, or `to` itself when it is one of them.
    const last = first + Math.floor((to - first) / MINUTE_MS) * MINUTE_MS;
    const end = last === to ? to : last + MINUTE_MS;
    let closedFrom = first;
    const closes = (until: number) => {
      if (until - closedFrom > longest.ms) Object.assign(longest, { ms: until - closedFrom, startsAt: closedFrom, endsAt: until });
    };
    for (let day = Math.floor(first / DAY_MS); day * DAY_MS < end; day++) {
      const stretches = this.stretchesOf(day);
      for (let index = 0; index < stretches.length && (stretches[index] as number) < end; index += 2) {
        if ((stretches[index] as number) > closedFrom) closes(stretches[index] as number);
        closedFrom = Math.max(closedFrom, stretches[index + 1] as number);
      }
    }
    if (closedFrom < end && last === to) closes(end);
    return longest;
  }

  /** The stretches of UTC day `day` in which renewal may send: the windows' (or the whole day) less the freezes'. */
  private stretchesOf(day: number): Stretches {
    const known = this.days.get(day);
    if (known) return known;
    if (this.days.size >= CACHED_DAYS) {
      this.days.clear();
      for (const firings of this.firings) firings.clear();
    }
    const open = this.windows.length === 0 ? [day * DAY_MS, (day + 1) * DAY_MS] : union(this.windows.map((entry, index) => this.cover(index, entry, day)));
    const frozen = this.freezes.map((entry, index) => this.cover(this.windows.length + index, entry, day));
    const allowed = frozen.length === 0 ? open : subtract(open, union(frozen));
    this.days.set(day, allowed);
    return allowed;
  }

  /** The stretches of `day` inside a period of the entry (one fired on an earlier day may reach into it). */
  private cover(index: number, entry: CalendarEntry, day: number): Stretches {
    const start = day * DAY_MS;
    const end = start + DAY_MS;
    // A period covers every minute it starts in: a duration of part of a minute covers the whole minute.
    const lasts = Math.ceil(entry.durationMs / MINUTE_MS) * MINUTE_MS;
    const covered: Stretches = [];
    // Periods all last as long, so the last one fired before the day reaches furthest into it.
    for (let earlier = day - 1; earlier >= day - Math.ceil(lasts / DAY_MS); earlier--) {
      const firedAt = this.firingsOf(index, entry, earlier).at(-1);
      if (firedAt === undefined) continue;
      if (firedAt + lasts > start) covered.push(start, Math.min(firedAt + lasts, end));
      break;
    }
    for (const firedAt of this.firingsOf(index, entry, day)) append(covered, firedAt, Math.min(firedAt + lasts, end));
    return covered;
  }

  private firingsOf(index: number, entry: CalendarEntry, day: number): number[] {
    const known = this.firings[index] as Map<number, number[]>;
    let firings = known.get(day);
    if (!firings) known.set(day, (firings = firingsOn(entry, day)));
    return firings;
  }
}
