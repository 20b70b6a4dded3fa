/**
 * bench:wire's round-trip loop (bench/measure.ts roundTrips), one after another and with calls in
 * flight: a failed call is counted and the loop goes on to the next, so the report's failures
 * column means the same in its sequential row as in the concurrent ones. The sequential loop used
 * to stop at the first failure, and its row always said 0.
 */
import { describe, expect, it } from "vitest";
import { roundTrips } from "../../../bench/measure";

/** A call that fails on every third index, noting which it was given and how many were in flight at most. */
function flakyCall() {
  const seen: number[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const call = async (index: number) => {
    seen.push(index);
    inFlight += 1;
    mostInFlight = Math.max(mostInFlight, inFlight);
    await Promise.resolve();
    inFlight -= 1;
    if (index % 3 === 0) throw new Error(`no reply to call ${index}`);
  };
  return { call, seen, mostInFlight: () => mostInFlight };
}

describe("bench:wire round trips", () => {
  it.each([1, 4])("with %i in flight, makes every call, counting the failed ones", async (inFlight) => {
    // Arrange
    const flaky = flakyCall();

    // Act
    const figures = await roundTrips(flaky.call, 10, inFlight);

    // Assert: indexes 0, 3, 6 and 9 failed; none was skipped or made twice.
    expect(figures).toMatchObject({ calls: 10, failures: 4 });
    expect([...flaky.seen].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(flaky.mostInFlight()).toBe(inFlight);
    expect(figures.perSecond).toBeCloseTo(10 / figures.seconds);
  });

  it("one in flight makes the calls in order", async () => {
    // Arrange
    const flaky = flakyCall();

    // Act
    await roundTrips(flaky.call, 5, 1);

    // Assert
    expect(flaky.seen).toEqual([0, 1, 2, 3, 4]);
  });
});
