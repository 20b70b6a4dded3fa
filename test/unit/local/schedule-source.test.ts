/**
 * The emulated EventBridge schedule: a function with reserved concurrency (renew's is 1) is not
 * invoked again while that many of its invocations run; without it every tick invokes.
 */
import { describe, expect, it } from "vitest";
import { InvocationLedger, ScheduleSource } from "../../../dev/local/lambda-runtime";

function schedule(reservedConcurrency: number | undefined) {
  let started = 0;
  let release: () => void = () => undefined;
  const running = new Promise<void>((resolve) => (release = resolve));
  const source = new ScheduleSource({
    function: { name: "test-renew", timeoutMs: 60_000, memoryMb: 256 },
    ledger: new InvocationLedger(),
    // Far beyond the test: only fire() ticks.
    rateMs: 3_600_000,
    fireAtStart: false,
    ...(reservedConcurrency === undefined ? {} : { reservedConcurrency }),
    handler: async () => {
      started++;
      await running;
    },
  });
  return { source, started: () => started, release };
}

describe("a scheduled function's reserved concurrency", () => {
  it("throttles the ticks that find a run still going, and invokes again once it ended", async () => {
    // Arrange
    const w = schedule(1);
    w.source.start();

    // Act
    w.source.fire();
    w.source.fire();
    w.source.fire();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const whileRunning = w.started();
    w.release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    w.source.fire();
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assert
    expect(whileRunning).toBe(1);
    expect(w.started()).toBe(2);
    await w.source.stop(1_000);
  });

  it("invokes at every tick without it, as EventBridge does", async () => {
    // Arrange
    const w = schedule(undefined);
    w.source.start();

    // Act
    w.source.fire();
    w.source.fire();
    w.source.fire();
    await new Promise((resolve) => setTimeout(resolve, 50));

    // Assert
    expect(w.started()).toBe(3);
    w.release();
    await w.source.stop(1_000);
  });
});
