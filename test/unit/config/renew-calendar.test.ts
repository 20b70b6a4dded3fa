/**
 * When renewal may send (lib/config/renew-calendar.ts): windows minus freezes, in the entries'
 * timezones with their daylight saving, and the longest closed stretch the load-time check uses.
 */
import { describe, expect, it } from "vitest";
import { parseCron } from "../../../lib/config/cron";
import { RenewCalendar, type CalendarEntry } from "../../../lib/config/renew-calendar";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

function entry(cron: string, duration: string, durationMs: number, timezone = "UTC"): CalendarEntry {
  const parsed = parseCron(cron);
  if (!("schedule" in parsed)) throw new Error(parsed.problems.join("; "));
  return { cron: parsed.schedule, timezone, durationMs, duration };
}

describe("the renewal calendar", () => {
  it("allows the minutes inside a window, not those in a freeze inside it", () => {
    // Arrange: 01:00-05:00 UTC daily, frozen 02:00-03:00 on Wednesdays (2026-06-03).
    const calendar = new RenewCalendar([entry("0 1 * * *", "4h", 4 * HOUR_MS)], [entry("0 2 * * wed", "1h", HOUR_MS)]);
    const tuesday = Date.UTC(2026, 5, 2);
    const wednesday = Date.UTC(2026, 5, 3);

    // Act and Assert
    expect(calendar.allowedAt(tuesday + 30 * MINUTE_MS)).toBe(false);
    expect(calendar.allowedAt(tuesday + HOUR_MS)).toBe(true);
    expect(calendar.allowedAt(tuesday + 2.5 * HOUR_MS)).toBe(true);
    expect(calendar.allowedAt(wednesday + 2.5 * HOUR_MS)).toBe(false);
    expect(calendar.allowedAt(wednesday + 5 * HOUR_MS)).toBe(false);
    expect(calendar.nextAllowed(wednesday + 2.5 * HOUR_MS, DAY_MS)).toBe(wednesday + 3 * HOUR_MS);
    expect(calendar.nextAllowed(wednesday + 6 * HOUR_MS, DAY_MS)).toBe(wednesday + DAY_MS + HOUR_MS);
  });

  it("reads the cron in the entry's timezone, and a window fired late one day reaches into the next", () => {
    // Arrange: 23:00 in New York (EDT, UTC-4) in June is 03:00 UTC the next day; the window lasts 6 h.
    const calendar = new RenewCalendar([entry("0 23 * * *", "6h", 6 * HOUR_MS, "America/New_York")], []);
    const day = Date.UTC(2026, 5, 2);

    // Act and Assert
    expect(calendar.allowedAt(day + 3 * HOUR_MS)).toBe(true);
    expect(calendar.allowedAt(day + 8 * HOUR_MS + 59 * MINUTE_MS)).toBe(true);
    expect(calendar.allowedAt(day + 9 * HOUR_MS)).toBe(false);
    expect(calendar.allowedAt(day + 2 * HOUR_MS + 59 * MINUTE_MS)).toBe(false);
  });

  it("finds the longer gap across the spring-forward day, when a local time does not occur", () => {
    // Arrange: 01:30 London daily for 1 h; on 2027-03-28 clocks go from 01:00 to 02:00, so 01:30 never comes.
    const calendar = new RenewCalendar([entry("30 1 * * *", "1h", HOUR_MS, "Europe/London")], []);
    const from = Date.UTC(2027, 2, 20);

    // Act
    const gap = calendar.longestGap(from, from + 14 * DAY_MS);

    // Assert: 23 h on an ordinary day; 46 h across the change (from 02:30 UTC on the 27th to 00:30 UTC on the 29th, BST).
    expect(gap).toEqual({ ms: 46 * HOUR_MS, startsAt: Date.UTC(2027, 2, 27, 2, 30), endsAt: Date.UTC(2027, 2, 29, 0, 30) });
    expect(new RenewCalendar([entry("30 1 * * *", "1h", HOUR_MS, "Europe/London")], []).longestGap(Date.UTC(2027, 5, 1), Date.UTC(2027, 5, 14)).ms).toBe(23 * HOUR_MS);
  });

  it("runs a repeated local time twice on the fall-back day", () => {
    // Arrange: 01:30 London on 2026-10-25 comes at 00:30 UTC (BST) and again at 01:30 UTC (GMT).
    const calendar = new RenewCalendar([entry("30 1 * * *", "10m", 10 * MINUTE_MS, "Europe/London")], []);

    // Act and Assert
    expect(calendar.allowedAt(Date.UTC(2026, 9, 25, 0, 35))).toBe(true);
    expect(calendar.allowedAt(Date.UTC(2026, 9, 25, 1, 35))).toBe(true);
    expect(calendar.allowedAt(Date.UTC(2026, 9, 25, 1, 5))).toBe(false);
  });

  it("is always open with neither windows nor freezes, and a freeze alone closes only itself", () => {
    // Arrange
    const open = new RenewCalendar([], []);
    const frozen = new RenewCalendar([], [entry("0 0 24 12 *", "72h", 72 * HOUR_MS, "Europe/Berlin")]);

    // Act and Assert
    expect(open.restricted).toBe(false);
    expect(open.allowedAt(0)).toBe(true);
    expect(frozen.allowedAt(Date.UTC(2026, 11, 25, 12))).toBe(false);
    expect(frozen.allowedAt(Date.UTC(2026, 11, 28, 12))).toBe(true);
    expect(frozen.longestGap(Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1))).toMatchObject({ ms: 72 * HOUR_MS, startsAt: Date.UTC(2026, 11, 23, 23) });
  });
});
