import { describe, expect, it } from "vitest";
import { DurationError, formatDuration, parseDuration } from "../../../lib/config/duration";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe("parseDuration", () => {
  it.each([
    ["1m", MINUTE],
    ["90s", 90 * SECOND],
    ["1h30m", HOUR + 30 * MINUTE],
    ["1.5h", 1.5 * HOUR],
    ["250ms", 250],
    ["500us", 0.5],
    ["2000ns", 0.002],
    [".5s", 500],
    ["-1m", -MINUTE],
    ["2d", 2 * DAY],
    ["2D", 2 * DAY],
    ["1w", 7 * DAY],
    ["1W", 7 * DAY],
    ["1M", 30 * DAY],
    ["1y", 365 * DAY],
    ["1Y", 365 * DAY],
    ["1.5d", 36 * HOUR],
    ["  10m  ", 10 * MINUTE],
    ["", 0],
  ])("reads %j as Go-Choria does", (text, expected) => {
    // Act
    const ms = parseDuration(text);

    // Assert
    expect(ms).toBeCloseTo(expected, 9);
  });

  it("truncates calendar units to whole hours like Go's time.Duration conversion", () => {
    // Arrange: 0.1 day is 2.4 hours; Go keeps 2 hours.
    const text = "0.1d";

    // Act
    const ms = parseDuration(text);

    // Assert
    expect(ms).toBe(2 * HOUR);
  });

  it.each(["10", "1x", "m", "1.2.3h", "1H", "1S", "abc", "1d2h", "--1m", "1e400y"])(
    "rejects %j with a DurationError",
    (text) => {
      // Act
      const parse = () => parseDuration(text);

      // Assert
      expect(parse).toThrow(DurationError);
    },
  );
});

describe("formatDuration", () => {
  it.each([
    [0, "0s"],
    [250, "250ms"],
    [1_500, "1.5s"],
    [7 * SECOND, "7s"],
    [22 * SECOND, "22s"],
    [90 * SECOND, "1m30s"],
    [HOUR, "1h"],
    [HOUR + 30 * MINUTE, "1h30m"],
    [-5 * SECOND, "-5s"],
    [7 * SECOND + 1e-9, "7s"],
  ])("writes %d ms as %j, a duration the configuration reads back", (ms, text) => {
    // Act
    const written = formatDuration(ms);

    // Assert
    expect(written).toBe(text);
    expect(parseDuration(written)).toBeCloseTo(ms, 3);
  });
});
