/**
 * When renewal may send (docs/renewal.md, "Change control"): inside a maintenance window
 * (`renew.windows`; none configured: always) and outside every freeze (`renew.freezes`). Each entry
 * is a cron expression read in an IANA timezone (through Intl, so daylight saving is the zone's own:
 * a local time skipped by a spring-forward does not occur that day, one repeated by a fall-back
 * occurs twice) and a duration from each time it fires. Time is cut into whole minutes, as the
 * `renew` runs (one a minute) see it; what is allowed is worked out a UTC day at a time and kept.
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
const DAY_MINUTES = 1_440;
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

/** The instants (epoch ms, whole minutes) of UTC day `day` at which the entry's cron fires in its timezone. */
function firingsOn(entry: CalendarEntry, day: number): number[] {
  const start = day * DAY_MS;
  // The offset at each hour; an hour whose two ends differ holds a transition and is read minute by minute.
  const hourly = Array.from({ length: 25 }, (_, hour) => offsetAt(entry.timezone, start + hour * 3_600_000));
  const firings: number[] = [];
  for (let minute = 0; minute < DAY_MINUTES; minute++) {
    const at = start + minute * MINUTE_MS;
    const hour = Math.floor(minute / 60);
    const offset = hourly[hour] === hourly[hour + 1] ? (hourly[hour] as number) : offsetAt(entry.timezone, at);
    const wall = new Date(at + offset);
    const fields = { minute: wall.getUTCMinutes(), hour: wall.getUTCHours(), day: wall.getUTCDate(), month: wall.getUTCMonth() + 1, weekday: wall.getUTCDay() };
    if (cronMatches(entry.cron, fields)) firings.push(at);
  }
  return firings;
}

export class RenewCalendar {
  private readonly days = new Map<number, Uint8Array>();
  private readonly firings = new Map<string, number[]>();

  constructor(
    readonly windows: readonly CalendarEntry[],
    readonly freezes: readonly CalendarEntry[],
  ) {}

  /** Whether windows or freezes restrict renewal at all. */
  get restricted(): boolean {
    return this.windows.length > 0 || this.freezes.length > 0;
  }

  allowedAt(at: number): boolean {
    if (!this.restricted) return true;
    const day = Math.floor(at / DAY_MS);
    return this.minutesOf(day)[Math.floor((at - day * DAY_MS) / MINUTE_MS)] === 1;
  }

  /** `at` when renewal may send then, else the first allowed minute after it within `withinMs`; undefined when there is none. */
  nextAllowed(at: number, withinMs: number): number | undefined {
    if (this.allowedAt(at)) return at;
    for (let minute = Math.floor(at / MINUTE_MS) * MINUTE_MS + MINUTE_MS; minute <= at + withinMs; minute += MINUTE_MS) {
      if (this.allowedAt(minute)) return minute;
    }
    return undefined;
  }

  /** `at` when renewal may not send then, else the first closed minute after it within `withinMs`; undefined when it stays open. */
  nextClosed(at: number, withinMs: number): number | undefined {
    if (!this.allowedAt(at)) return at;
    for (let minute = Math.floor(at / MINUTE_MS) * MINUTE_MS + MINUTE_MS; minute <= at + withinMs; minute += MINUTE_MS) {
      if (!this.allowedAt(minute)) return minute;
    }
    return undefined;
  }

  /** The longest stretch in [from, to) in which renewal may not send; ms 0 when it may always. */
  longestGap(from: number, to: number): CalendarGap {
    const longest: CalendarGap = { ms: 0, startsAt: from, endsAt: from };
    let startsAt: number | undefined;
    const first = Math.floor(from / MINUTE_MS) * MINUTE_MS;
    for (let minute = first; minute <= to; minute += MINUTE_MS) {
      const closed = minute < to && !this.allowedAt(minute);
      if (closed) {
        startsAt ??= minute;
        continue;
      }
      if (startsAt !== undefined && minute - startsAt > longest.ms) Object.assign(longest, { ms: minute - startsAt, startsAt, endsAt: minute });
      startsAt = undefined;
    }
    return longest;
  }

  /** 1 for each minute of UTC day `day` renewal may send in. */
  private minutesOf(day: number): Uint8Array {
    const known = this.days.get(day);
    if (known) return known;
    if (this.days.size >= CACHED_DAYS) {
      this.days.clear();
      this.firings.clear();
    }
    const allowed = new Uint8Array(DAY_MINUTES).fill(this.windows.length === 0 ? 1 : 0);
    this.windows.forEach((entry, index) => this.cover(`w${index}`, entry, day, allowed, 1));
    this.freezes.forEach((entry, index) => this.cover(`f${index}`, entry, day, allowed, 0));
    this.days.set(day, allowed);
    return allowed;
  }

  /** Sets `value` on each minute of `day` inside a period of `entry` (one fired on an earlier day may reach into it). */
  private cover(name: string, entry: CalendarEntry, day: number, minutes: Uint8Array, value: 0 | 1): void {
    const start = day * DAY_MS;
    for (let earlier = day - Math.ceil(entry.durationMs / DAY_MS); earlier <= day; earlier++) {
      const key = `${name}:${earlier}`;
      let firings = this.firings.get(key);
      if (!firings) this.firings.set(key, (firings = firingsOn(entry, earlier)));
      for (const firedAt of firings) {
        const from = Math.max(firedAt, start);
        const to = Math.min(firedAt + entry.durationMs, start + DAY_MS);
        for (let at = from; at < to; at += MINUTE_MS) minutes[(at - start) / MINUTE_MS] = value;
      }
    }
  }
}
