import { describe, expect, it } from "vitest";
import { goDuration } from "../../../lib/engine/go-duration";
import { waitedTooLong } from "../../../lib/engine/waiting";

/**
 * `time.Duration(ns).String()` as printed by Go 1.26 (`go run` of a loop over these values): the
 * Go daemon's and the node's messages format durations with `%v`.
 */
const GO_PRINTS: Array<[nanoseconds: number, printed: string]> = [
  [0, "0s"],
  [1, "1ns"],
  [999, "999ns"],
  [1_000, "1µs"],
  [1_500, "1.5µs"],
  [500_000, "500µs"],
  [1_000_000, "1ms"],
  [1_500_000, "1.5ms"],
  [250_000_000, "250ms"],
  [999_999_999, "999.999999ms"],
  [1_000_000_000, "1s"],
  [1_500_000_000, "1.5s"],
  [59_999_000_000, "59.999s"],
  [60_000_000_000, "1m0s"],
  [125_300_000_000, "2m5.3s"],
  [3_726_000_000_000, "1h2m6s"],
  [90_061_001_000_000, "25h1m1.001s"],
  [31_536_000_000_000_000, "8760h0m0s"],
  [-1_500_000_000, "-1.5s"],
  [-250_000_000, "-250ms"],
  [1_000_000_001, "1.000000001s"],
];

describe("goDuration", () => {
  it.each(GO_PRINTS)("prints %d ns as Go does: %s", (nanoseconds, printed) => {
    // Act
    const text = goDuration(nanoseconds / 1e6);

    // Assert
    expect(text).toBe(printed);
  });
});

describe("waitedTooLong (Go's isCurrent limit: 2 x interval)", () => {
  const INTERVAL_MS = 60_000;

  it("keeps work admitted exactly 2 x interval ago", () => {
    // Assert
    expect(waitedTooLong(1_000, 1_000 + 2 * INTERVAL_MS, INTERVAL_MS)).toBeUndefined();
  });

  it("skips work admitted longer ago, with Go's message", () => {
    // Assert
    expect(waitedTooLong(1_000, 1_000 + 2 * INTERVAL_MS + 1, INTERVAL_MS)).toBe("skipping node that's been waiting 2m0.001s");
  });
});
