/**
 * The renewal calendar (lib/config/renew-calendar.ts) works out its allowed stretches from each
 * cron's firings a local day at a time; this checks it against the plain way, kept here: read
 * every minute's local time (the zone's offset at each hour, and at each minute of an hour whose
 * two ends differ, as the calendar once did), fire where the cron matches, cover each period's
 * minutes, and walk the minutes. Random windows and freezes in zones with daylight saving (whole,
 * half and three-quarter hours, both hemispheres) over weeks holding the March-April and
 * September-November changes; seeded, so a failure is the same on every run.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cronMatches, parseCron } from "../../../lib/config/cron";
import { RenewCalendar, type CalendarEntry } from "../../../lib/config/renew-calendar";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
const LONGEST_MS = 3 * DAY_MS;
const ZONES = ["UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/St_Johns", "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kathmandu", "America/Sao_Paulo"];
/** Stretches holding the spring and autumn changes of every zone above (2027). */
const PERIODS = [
  { start: Date.UTC(2027, 2, 6), days: 32 },
  { start: Date.UTC(2027, 8, 20), days: 50 },
];

const formatters = new Map<string, Intl.DateTimeFormat>();

function offsetAt(timezone: string, at: number): number {
  let formatter = formatters.get(timezone);
  if (!formatter) {
    const options = { timeZone: timezone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" } as const;
    formatters.set(timezone, (formatter = new Intl.DateTimeFormat("en-US", options)));
  }
  const fields: Record<string, number> = {};
  for (const part of formatter.formatToParts(at)) if (part.type !== "literal") fields[part.type] = Number(part.value);
  return Date.UTC(fields.year ?? 0, (fields.month ?? 1) - 1, fields.day ?? 1, fields.hour ?? 0, fields.minute ?? 0, fields.second ?? 0) - at;
}

/** 1 for each minute from `base` (count of them) some period of the entry covers. */
function coveredMinutes(entry: CalendarEntry, base: number, count: number): Uint8Array {
  const covered = new Uint8Array(count);
  const lasts = Math.ceil(entry.durationMs / MINUTE_MS);
  let hourOffsets: [number, number] = [Number.NaN, Number.NaN];
  let lastFiring = -Infinity;
  for (let minute = 0; minute < count; minute++) {
    const at = base + minute * MINUTE_MS;
    if (minute % 60 === 0) hourOffsets = [offsetAt(entry.timezone, at), offsetAt(entry.timezone, at + HOUR_MS)];
    const offset = hourOffsets[0] === hourOffsets[1] ? hourOffsets[0] : offsetAt(entry.timezone, at);
    const wall = new Date(at + offset);
    if (cronMatches(entry.cron, { minute: wall.getUTCMinutes(), hour: wall.getUTCHours(), day: wall.getUTCDate(), month: wall.getUTCMonth() + 1, weekday: wall.getUTCDay() })) lastFiring = minute;
    covered[minute] = minute - lastFiring < lasts ? 1 : 0;
  }
  return covered;
}

/** The plain calendar: allowed minutes from `base` (which must start on an hour), windows' cover less freezes'. */
function referenceOf(windows: CalendarEntry[], freezes: CalendarEntry[], base: number, count: number) {
  const allowed = new Uint8Array(count).fill(windows.length === 0 ? 1 : 0);
  for (const entry of windows) coveredMinutes(entry, base, count).forEach((on, minute) => on === 1 && (allowed[minute] = 1));
  for (const entry of freezes) coveredMinutes(entry, base, count).forEach((on, minute) => on === 1 && (allowed[minute] = 0));
  const allowedAt = (at: number) => allowed[Math.floor((at - base) / MINUTE_MS)] === 1;
  const next = (at: number, withinMs: number, wanted: boolean) => {
    if (allowedAt(at) === wanted) return at;
    for (let minute = Math.floor(at / MINUTE_MS) * MINUTE_MS + MINUTE_MS; minute <= at + withinMs; minute += MINUTE_MS) if (allowedAt(minute) === wanted) return minute;
    return undefined;
  };
  const longestGap = (from: number, to: number) => {
    const longest = { ms: 0, startsAt: from, endsAt: from };
    let startsAt: number | undefined;
    for (let minute = Math.floor(from / MINUTE_MS) * MINUTE_MS; minute <= to; minute += MINUTE_MS) {
      if (minute < to && !allowedAt(minute)) {
        startsAt ??= minute;
        continue;
      }
      if (startsAt !== undefined && minute - startsAt > longest.ms) Object.assign(longest, { ms: minute - startsAt, startsAt, endsAt: minute });
      startsAt = undefined;
    }
    return longest;
  };
  return { allowedAt, nextAllowed: (at: number, withinMs: number) => next(at, withinMs, true), nextClosed: (at: number, withinMs: number) => next(at, withinMs, false), longestGap };
}

const field = (...choices: string[]) => fc.constantFrom(...choices);
const cronText = fc
  .tuple(
    field("0", "30", "45", "*/15", "*/7", "0,30", "5-10", "59", "*"),
    field("*", "0", "1", "2", "3", "1-3", "22", "23", "*/6", "2,14"),
    field("*", "*", "1", "15", "28-31", "*/10"),
    field("*", "*", "3", "4", "10", "mar,oct", "9-11"),
    field("*", "*", "0", "sun", "1-5", "6", "sat,sun"),
  )
  .map((fields) => fields.join(" "))
  .filter((text) => "schedule" in parseCron(text));
const entryOf = fc.record({
  cron: cronText,
  timezone: fc.constantFrom(...ZONES),
  minutes: fc.oneof(fc.integer({ min: 1, max: 180 }), fc.integer({ min: 1, max: LONGEST_MS / MINUTE_MS })),
});
const toEntry = ({ cron, timezone, minutes }: { cron: string; timezone: string; minutes: number }): CalendarEntry => {
  const parsed = parseCron(cron);
  if (!("schedule" in parsed)) throw new Error(parsed.problems.join("; "));
  return { cron: parsed.schedule, timezone, durationMs: minutes * MINUTE_MS, duration: `${minutes}m` };
};

describe("the renewal calendar against a minute-by-minute reference", () => {
  it("agrees on every minute's allowedAt, on nextAllowed and nextClosed, and on the longest gap", () => {
    fc.assert(
      fc.property(
        fc.array(entryOf, { maxLength: 2 }),
        fc.array(entryOf, { maxLength: 2 }),
        fc.constantFrom(...PERIODS),
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 4, maxLength: 4 }),
        (windowSpecs, freezeSpecs, period, [fromShare, toShare, probeShare, withinShare]) => {
          // Arrange
          const windows = windowSpecs.map(toEntry);
          const freezes = freezeSpecs.map(toEntry);
          const base = period.start - LONGEST_MS - DAY_MS;
          const end = period.start + period.days * DAY_MS;
          const reference = referenceOf(windows, freezes, base, (end + DAY_MS - base) / MINUTE_MS);
          const calendar = new RenewCalendar(windows, freezes);
          const from = period.start + Math.floor((fromShare as number) * (period.days - 7) * DAY_MS);
          const to = from + Math.floor((toShare as number) * 7 * DAY_MS);
          const probe = period.start + Math.floor((probeShare as number) * (period.days - 3) * DAY_MS);
          const withinMs = Math.floor((withinShare as number) * 2 * DAY_MS);

          // Act and Assert
          for (let minute = period.start; minute < end; minute += MINUTE_MS) {
            if (calendar.allowedAt(minute) !== reference.allowedAt(minute)) expect.fail(`allowedAt ${new Date(minute).toISOString()}: ${calendar.allowedAt(minute)}`);
          }
          expect(calendar.nextAllowed(probe, withinMs)).toBe(reference.nextAllowed(probe, withinMs));
          expect(calendar.nextClosed(probe, withinMs)).toBe(reference.nextClosed(probe, withinMs));
          expect(calendar.longestGap(from, to)).toEqual(reference.longestGap(from, to));
          const aligned = Math.floor(to / MINUTE_MS) * MINUTE_MS;
          expect(calendar.longestGap(from, aligned)).toEqual(reference.longestGap(from, aligned));
        },
      ),
      { seed: 20_261_204, numRuns: 60 },
    );
  }, 60_000);
});
