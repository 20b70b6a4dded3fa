import { describe, expect, it } from "vitest";
import { ConfigError, LeaseLostError, PausedError } from "../../../lib/errors";
import { createLeaseGate, UNELECTED_TERM } from "../../../lib/lease/gate";
import { runLeaseKeeper } from "../../../lib/lease/keeper";
import type { LeaseStore } from "../../../lib/lease/lease";
import { MemoryLeaseStore } from "../../../lib/lease/memory-lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC, METRIC, type Clock } from "../../../lib/ports";
import { RecordingMetrics, SharedTime } from "./support";

const settingsFor = (deploymentId: string) => resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId });

/** Wraps a store to count calls and, optionally, make each call take time on the given clock. */
function instrumented(inner: LeaseStore, clock?: Clock, latencyMs = 0) {
  const calls: string[] = [];
  const call = async <T>(name: string, send: () => Promise<T>): Promise<T> => {
    calls.push(name);
    if (clock && latencyMs) await clock.sleep(latencyMs);
    return send();
  };
  const store: LeaseStore = {
    claim: (request) => call("claim", () => inner.claim(request)),
    extend: (request) => call("extend", () => inner.extend(request)),
    release: (request) => call("release", () => inner.release(request)),
    read: (site) => call("read", () => inner.read(site)),
  };
  return { store, calls };
}

const unusableStore: LeaseStore = {
  claim: () => Promise.reject(new Error("no lease traffic expected")),
  extend: () => Promise.reject(new Error("no lease traffic expected")),
  release: () => Promise.reject(new Error("no lease traffic expected")),
  read: () => Promise.reject(new Error("no lease traffic expected")),
};

describe("lease settings", () => {
  it("defaults to a 30 s lease renewed every 10 s with a 5 s skew bound", () => {
    expect(settingsFor("prod")).toMatchObject({ leaseDurationMs: 30_000, renewIntervalMs: 10_000, skewBoundMs: 5_000 });
  });

  it("rejects a renew interval the holder's validity cannot outlast, naming the key", () => {
    const build = () =>
      resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: "prod", leaseDurationMs: 10_000, renewIntervalMs: 8_000, skewBoundMs: 2_000 });

    expect(build).toThrow(ConfigError);
    expect(build).toThrow(/lease.renew_interval/);
  });

  it("requires a deployment id when leader election is on", () => {
    expect(() => resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: " " })).toThrow(/lease.deployment_id/);
  });
});

describe("pause gate without leader election", () => {
  it("is always open at term 0, with no lease traffic, and reports not paused from the first call", async () => {
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(resolveLeaseSettings({ leaderElection: false, site: "eu", deploymentId: "" }), { store: unusableStore, metrics });

    await gate.assertOpen(UNELECTED_TERM, 3_600_000);
    const term = await gate.currentTerm();

    expect(term).toBe(0);
    expect(metrics.gauges.filter((gauge) => gauge.name === METRIC.paused).map((gauge) => gauge.value)).toEqual([0, 0]);
  });
});

describe("pause gate with leader election", () => {
  it("reports the paused gauge on its very first evaluation", async () => {
    const time = new SharedTime();
    const metrics = new RecordingMetrics();
    const store = new MemoryLeaseStore();
    await createLeaseGate(settingsFor("other"), { store, metrics: new RecordingMetrics(), clock: time.clock() }).acquireOrRenew();
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics, clock: time.clock() });

    await expect(gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);

    expect(metrics.gauges).toContainEqual({ name: METRIC.paused, value: 1 });
  });

  it("opens without any store traffic while the held validity covers the attempt", async () => {
    const time = new SharedTime();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.clock() });
    await gate.acquireOrRenew();
    const callsAfterAcquire = calls.length;
    time.advance(15_000);

    await gate.assertOpen(1, 10_000);

    expect(calls.length).toBe(callsAfterAcquire);
  });

  it("renews first when the remaining validity does not cover the next attempt", async () => {
    const time = new SharedTime();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.clock() });
    await gate.acquireOrRenew();
    time.advance(15_001);

    await gate.assertOpen(1, 10_000);

    expect(calls).toEqual(["extend", "claim", "extend"]);
  });

  it("counts validity from before the write was sent, so a slow write shortens it", async () => {
    const time = new SharedTime();
    const clock = time.clock();
    const { store } = instrumented(new MemoryLeaseStore(), clock, 4_000);
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock });

    const outcome = await gate.acquireOrRenew();

    // extend (fails, absent) then claim: 4 s each way; validity = 30 s - 5 s skew - 4 s of the claim's trip.
    expect(outcome).toMatchObject({ holding: true, validForMs: 21_000 });
  });

  it("does not let a forward jump of the holder's wall clock stretch its validity", async () => {
    const time = new SharedTime();
    let wallJump = 0;
    const base = time.clock();
    const clock: Clock = { now: () => base.now() + wallJump, monotonic: () => base.monotonic(), sleep: (ms) => base.sleep(ms) };
    const gate = createLeaseGate(settingsFor("prod"), { store: new MemoryLeaseStore(), metrics: new RecordingMetrics(), clock });
    await gate.acquireOrRenew();

    wallJump = -3_600_000;
    time.advance(25_001);

    await expect(gate.assertOpen(1, 1)).resolves.toBeUndefined();
    expect((await gate.acquireOrRenew()).holding).toBe(true);
  });

  it("refuses an attempt longer than one lease validity with a clear reason", async () => {
    const gate = createLeaseGate(settingsFor("prod"), { store: new MemoryLeaseStore(), metrics: new RecordingMetrics(), clock: new SharedTime().clock() });
    await gate.acquireOrRenew();

    await expect(gate.assertOpen(1, 25_001)).rejects.toThrow(/cannot fit in one lease validity of 25000 ms/);
  });

  it("fails stale work with LeaseLostError while the deployment still leads under a newer term", async () => {
    const time = new SharedTime();
    const store = new MemoryLeaseStore();
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics, clock: time.clock() });
    await gate.acquireOrRenew();
    await gate.release();
    time.advance(40_000);
    await createLeaseGate(settingsFor("other"), { store, metrics: new RecordingMetrics(), clock: time.clock() }).acquireOrRenew();
    time.advance(40_000);
    await gate.acquireOrRenew();

    await expect(gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
    expect(metrics.lastGauge(METRIC.paused)).toBe(0);
    expect(metrics.lastGauge(EXTRA_METRIC.leaseTerm)).toBe(3);
  });

  it("calls onWon once per newly won term, and shares one round trip between concurrent callers", async () => {
    const time = new SharedTime();
    const won: number[] = [];
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.clock(), onWon: (term) => void won.push(term) });

    await Promise.all([gate.assertOpen(1, 1_000), gate.assertOpen(1, 1_000), gate.currentTerm()]);
    time.advance(10_000);
    await gate.acquireOrRenew();

    expect(won).toEqual([1]);
    expect(calls).toEqual(["extend", "claim", "extend"]);
  });
});

describe("lease keeper loop", () => {
  it("renews every interval and returns before its deadline", async () => {
    const time = new SharedTime();
    const clock = time.clock();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock });
    const until = clock.monotonic() + 58_000;

    const summary = await runLeaseKeeper({ lease: gate, clock, until, intervalMs: 10_000 });

    expect(summary).toEqual({ rounds: 6, heldRounds: 6, failedRounds: 0, wonTerms: [1] });
    expect(calls.filter((call) => call === "extend")).toHaveLength(6);
    expect(clock.monotonic()).toBeLessThanOrEqual(until);
  });

  it("takes over as a standby once the leader stops renewing, and reports the won term", async () => {
    const time = new SharedTime();
    const store = new MemoryLeaseStore();
    await createLeaseGate(settingsFor("crashed"), { store, metrics: new RecordingMetrics(), clock: time.clock() }).acquireOrRenew();
    const clock = time.clock();
    const standby = createLeaseGate(settingsFor("standby"), { store, metrics: new RecordingMetrics(), clock });
    const won: number[] = [];

    const summary = await runLeaseKeeper({ lease: standby, clock, until: clock.monotonic() + 58_000, intervalMs: 10_000, onWon: (term) => void won.push(term) });

    // Rounds at 0..50 s; the lease written at 0 s may be taken over after 35 s, so the 40 s round wins.
    expect(won).toEqual([2]);
    expect(summary).toMatchObject({ rounds: 6, heldRounds: 2, wonTerms: [2] });
  });

  it("keeps going through store failures, counting them", async () => {
    const time = new SharedTime();
    const clock = time.clock();
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(settingsFor("prod"), { store: unusableStore, metrics, clock });

    const summary = await runLeaseKeeper({ lease: gate, clock, until: clock.monotonic() + 30_000, intervalMs: 10_000 });

    expect(summary).toMatchObject({ rounds: 3, heldRounds: 0, failedRounds: 3 });
    expect(metrics.total(EXTRA_METRIC.leaseStoreErrors)).toBe(3);
    expect(metrics.lastGauge(METRIC.paused)).toBe(1);
  });
});
