/**
 * The five-field cron of renewal's windows and freezes (lib/config/cron.ts): what it accepts, what
 * it matches, and that every mistake in an expression is named at once.
 */
import { describe, expect, it } from "vitest";
import { cronMatches, parseCron, type CronSchedule } from "../../../lib/config/cron";

function schedule(text: string): CronSchedule {
  const parsed = parseCron(text);
  if (!("schedule" in parsed)) throw new Error(`${text}: ${parsed.problems.join("; ")}`);
  return parsed.schedule;
}

/** 2026-06-01 is a Monday. */
const at = (day: number, hour: number, minute: number, month = 6, weekday = day % 7) => ({ minute, hour, day, month, weekday });

describe("a renewal window's cron expression", () => {
  it("matches values, ranges, steps, lists and names", () => {
    // Arrange
    const weekdaysAtTwo = schedule("0,30 2 * * mon-fri");
    const everyQuarter = schedule("*/15 9-17/4 * jan,jun *");

    // Act and Assert
    expect(cronMatches(weekdaysAtTwo, at(1, 2, 30))).toBe(true);
    expect(cronMatches(weekdaysAtTwo, at(1, 2, 15))).toBe(false);
    expect(cronMatches(weekdaysAtTwo, at(6, 2, 0))).toBe(false); // Saturday
    expect(cronMatches(everyQuarter, at(3, 13, 45))).toBe(true);
    expect(cronMatches(everyQuarter, at(3, 11, 45))).toBe(false);
    expect(cronMatches(everyQuarter, at(3, 13, 45, 7))).toBe(false);
  });

  it("takes 7 as Sunday, and a day matching either restricted day field, as Vixie cron does", () => {
    // Arrange
    const sundays = schedule("0 3 * * 7");
    const firstOrMonday = schedule("0 3 1 * 1");

    // Act and Assert
    expect(cronMatches(sundays, at(7, 3, 0))).toBe(true);
    expect(cronMatches(firstOrMonday, at(1, 3, 0))).toBe(true);
    expect(cronMatches(firstOrMonday, at(8, 3, 0))).toBe(true);
    expect(cronMatches(firstOrMonday, at(9, 3, 0))).toBe(false);
  });

  it("names every mistake in one pass, by field", () => {
    // Act
    const parsed = parseCron("60 24 0 13 mon-x");

    // Assert
    expect(parsed).toEqual({
      problems: [
        'minute "60": "60" is not a number from 0 to 59',
        'hour "24": "24" is not a number from 0 to 23',
        'day of month "0": "0" is not a number from 1 to 31',
        'month "13": "13" is not a number from 1 to 12 or a name (jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov, dec)',
        'day of week "mon-x": "mon-x" is not a number from 0 to 7 or a name (sun, mon, tue, wed, thu, fri, sat)',
      ],
    });
  });

  it("refuses shorthands, seconds, backward ranges, zero steps and a date that never comes", () => {
    expect(parseCron("@daily")).toEqual({ problems: [expect.stringContaining("has 1 fields; a cron expression has 5")] });
    expect(parseCron("0 0 0 * * *")).toEqual({ problems: [expect.stringContaining("has 6 fields")] });
    expect(parseCron("0 5-2 * * *")).toEqual({ problems: ['hour "5-2": the range "5-2" runs backwards'] });
    expect(parseCron("*/0 * * * *")).toEqual({ problems: ['minute "*/0": the step in "*/0" must be at least 1'] });
    expect(parseCron("0 0 30,31 feb *")).toEqual({ problems: ['"0 0 30,31 feb *" never matches: no month it allows has a day it allows'] });
  });
});
