import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rpcWithRetries, type RetriedCall } from "../../../lib/engine/retry";
import { OutOfTimeError, RpcRetriesExhaustedError } from "../../../lib/engine/errors";
import { LeaseLostError, LeaseStoreError, PausedError } from "../../../lib/errors";
import { METRIC } from "../../../lib/ports/metric-names";
import { silentLogger } from "../../../lib/ports/logger";
import { seededRandom } from "../../support/random";
import { FakeGate, RecordingMetrics, timeout, VirtualClock } from "../../support/fakes";
import { START_WALL_MS } from "./support";

const RPC = "choria_provision#configure";
const NODE = "node1.example.net";

/** Go's `backoff.FiveSec` base sleeps (ms), index min(try, 10), stated here as the Go source has them. */
const FIVE_SEC_BACKOFF_MS = [500, 750, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000];

/** The sleep Go's TrySleep(ctx, afterTry) takes for a random draw: the base jittered into [base/2, 1.5 x base). */
function backoffDelayMs(afterTry: number, random: () => number): number {
  const base = FIVE_SEC_BACKOFF_MS[Math.min(afterTry, FIVE_SEC_BACKOFF_MS.length - 1)]!;
  return Math.floor(base / 2) + Math.floor(random() * base);
}

function setup(overrides: Partial<RetriedCall<string>> = {}) {
  const clock = new VirtualClock(START_WALL_MS, 1_000);
  const gate = new FakeGate();
  const metrics = new RecordingMetrics();
  const attempts: number[] = [];
  const options: RetriedCall<string> = {
    identity: NODE,
    rpc: RPC,
    tries: 5,
    attemptTimeoutMs: 22_000,
    term: 3,
    gate,
    clock,
    metrics,
    logger: silentLogger,
    random: seededRandom(42),
    call: async (tryNumber) => {
      attempts.push(tryNumber);
      clock.advance(100);
      throw timeout(NODE, RPC);
    },
    ...overrides,
  };
  return { clock, gate, metrics, attempts, options };
}

describe("the backoff between attempts (Go FiveSec)", () => {
  it("sleeps within [base/2, 1.5 x base) of the capped index after each failed try, for any random draw", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 14 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), async (tries, draw) => {
        // Arrange
        const { clock, options } = setup({ tries, random: () => draw });

        // Act
        await rpcWithRetries(options).catch(() => undefined);

        // Assert
        expect(clock.sleeps).toHaveLength(tries - 1);
        clock.sleeps.forEach((delay, index) => {
          const base = FIVE_SEC_BACKOFF_MS[Math.min(index + 1, FIVE_SEC_BACKOFF_MS.length - 1)]!;
          expect(Number.isInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(Math.floor(base / 2));
          expect(delay).toBeLessThan(Math.floor(base / 2) + base);
        });
      }),
    );
  });

  it("uses the base of the try number after the first try, as Go's TrySleep(ctx, tries) does", async () => {
    // Arrange
    const { clock, options } = setup({ tries: 12, random: () => 0 });

    // Act
    await rpcWithRetries(options).catch(() => undefined);

    // Assert: after tries 1, 2, 10 and 11 (the cap).
    expect([1, 2, 10, 11].map((afterTry) => clock.sleeps[afterTry - 1])).toEqual([750 / 2, 1000 / 2, 5000 / 2, 5000 / 2]);
  });
});

describe("rpcWithRetries", () => {
  it("retries until an attempt succeeds, sleeping the jittered backoff between attempts", async () => {
    // Arrange
    const { clock, metrics, attempts, options } = setup();
    const call = options.call;
    options.call = async (tryNumber, window) => (tryNumber < 3 ? call(tryNumber, window) : (attempts.push(tryNumber), "configured"));
    const expectedDraws = seededRandom(42);

    // Act
    const result = await rpcWithRetries(options);

    // Assert
    expect(result).toBe("configured");
    expect(attempts).toEqual([1, 2, 3]);
    expect(clock.sleeps).toEqual([backoffDelayMs(1, expectedDraws), backoffDelayMs(2, expectedDraws)]);
    expect(metrics.of(METRIC.rpcTime)).toHaveLength(3);
    expect(metrics.of(METRIC.rpcTime).every((record) => record.labels?.rpc === RPC)).toBe(true);
    expect(metrics.total(METRIC.rpcErrors)).toBe(0);
  });

  it("gives up after `tries` attempts without sleeping after the last one and counts one rpc error", async () => {
    // Arrange
    const { clock, metrics, attempts, options } = setup({ tries: 3 });

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(RpcRetriesExhaustedError);
    expect((failure as RpcRetriesExhaustedError).tries).toBe(3);
    expect((failure as Error).cause).toBeInstanceOf(Error);
    expect((failure as Error).message).toBe(`${RPC} to ${NODE} failed: gave up after 3 tries: no reply within the attempt timeout`);
    expect(attempts).toEqual([1, 2, 3]);
    expect(clock.sleeps).toHaveLength(2);
    expect(metrics.of(METRIC.rpcTime).map((record) => record.value)).toEqual([0.1, 0.1, 0.1]);
    expect(metrics.of(METRIC.rpcErrors)).toEqual([{ type: "count", name: METRIC.rpcErrors, value: 1, labels: { rpc: RPC } }]);
  });

  it("reads the gate before the loop and before every attempt with the term and attempt timeout", async () => {
    // Arrange
    const { gate, options } = setup({ tries: 2 });

    // Act
    await rpcWithRetries(options).catch(() => undefined);

    // Assert
    expect(gate.checks).toEqual([
      { term: 3, attemptTimeoutMs: 22_000 },
      { term: 3, attemptTimeoutMs: 22_000 },
      { term: 3, attemptTimeoutMs: 22_000 },
    ]);
  });

  it("sends nothing and counts no rpc error when the gate is closed before the loop", async () => {
    // Arrange
    const { gate, metrics, attempts, options } = setup();
    gate.close();

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(PausedError);
    expect(attempts).toEqual([]);
    expect(metrics.total(METRIC.rpcErrors)).toBe(0);
  });

  it("stops at the next attempt boundary when the gate closes mid-retries", async () => {
    // Arrange
    const { gate, metrics, attempts, clock, options } = setup();
    gate.closeWhen = () => attempts.length >= 2;
    gate.failure = new LeaseLostError("lease term 3 was taken over by term 4");

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBe(gate.failure);
    expect(attempts).toEqual([1, 2]);
    expect(clock.sleeps).toHaveLength(2);
    expect(metrics.total(METRIC.rpcErrors, RPC)).toBe(1);
  });

  it("treats a gate that cannot be read as closed", async () => {
    // Arrange
    const { gate, attempts, options } = setup();
    const storeDown = new LeaseStoreError("lease table unreachable");
    gate.close(storeDown);

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(PausedError);
    expect((failure as Error).cause).toBe(storeDown);
    expect(attempts).toEqual([]);
  });

  it("does not start an attempt that cannot finish before the invocation deadline", async () => {
    // Arrange
    const { attempts, gate, options } = setup({ remainingMs: () => 21_999 });

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(OutOfTimeError);
    expect((failure as OutOfTimeError).neededMs).toBe(22_000);
    expect(attempts).toEqual([]);
    expect(gate.checks).toHaveLength(1);
  });

  it("does not sleep into a backoff when the next attempt could not finish afterwards", async () => {
    // Arrange
    const deadline = { at: 0 };
    const { clock, attempts, metrics, options } = setup({ remainingMs: () => deadline.at - clock.monotonic() });
    deadline.at = clock.monotonic() + 100 + 22_000 + 300;

    // Act
    const failure = await rpcWithRetries(options).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(OutOfTimeError);
    expect(attempts).toEqual([1]);
    expect(clock.sleeps).toEqual([]);
    expect(metrics.total(METRIC.rpcErrors, RPC)).toBe(1);
  });

  it("runs the next attempt when the backoff and the attempt both fit", async () => {
    // Arrange
    const { clock, attempts, options } = setup({ tries: 2 });
    const end = clock.monotonic() + 100 + 1_125 + 22_000 + 100;
    options.remainingMs = () => end - clock.monotonic();
    options.random = () => 0.99;

    // Act
    await rpcWithRetries(options).catch(() => undefined);

    // Assert
    expect(clock.sleeps).toEqual([backoffDelayMs(1, () => 0.99)]);
    expect(attempts).toEqual([1, 2]);
  });
});
