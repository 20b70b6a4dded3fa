import { describe, expect, it } from "vitest";
import { ConfigError, LeaseLostError, PausedError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import type { Clock } from "../../../lib/ports/clock";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";
import { keepLeaseByTicks } from "../../support/lease-rounds";

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
    markAnnounced: (request) => call("markAnnounced", () => inner.markAnnounced(request)),
    recordPeer: (request) => call("recordPeer", () => inner.recordPeer(request)),
    read: (site) => call("read", () => inner.read(site)),
  };
  return { store, calls };
}

const unusableStore: LeaseStore = {
  claim: () => Promise.reject(new Error("no lease traffic expected")),
  extend: () => Promise.reject(new Error("no lease traffic expected")),
  release: () => Promise.reject(new Error("no lease traffic expected")),
  markAnnounced: () => Promise.reject(new Error("no lease traffic expected")),
  recordPeer: () => Promise.reject(new Error("no lease traffic expected")),
  read: () => Promise.reject(new Error("no lease traffic expected")),
};

describe("lease settings", () => {
  it("defaults to a 30 s lease kept every 10 s with a 5 s skew bound", () => {
    expect(settingsFor("prod")).toMatchObject({ leaseDurationMs: 30_000, keepIntervalMs: 10_000, skewBoundMs: 5_000 });
  });

  it("rejects a keep interval the holder's validity cannot outlast, naming the key", () => {
    const build = () =>
      resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: "prod", leaseDurationMs: 10_000, keepIntervalMs: 8_000, skewBoundMs: 2_000 });

    expect(build).toThrow(ConfigError);
    expect(build).toThrow(/lease.renew_interval/);
  });

  it("requires a deployment id when leader election is on", () => {
    expect(() => resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: " " })).toThrow(/key "deployment_id"/);
  });
});

describe("pause gate without leader election", () => {
  it("is always open at term 0, with no lease traffic, and reports not paused from the first call", async () => {
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(resolveLeaseSettings({ leaderElection: false, site: "eu", deploymentId: "" }), { store: unusableStore, metrics });

    // Without leader election every piece of work carries term 0.
    await gate.assertOpen(0, 3_600_000);
    const term = await gate.currentTerm();

    expect(term).toBe(0);
    expect(metrics.values(METRIC.paused)).toEqual([0, 0]);
  });
});

describe("pause gate with leader election", () => {
  it("reports the paused gauge on its very first evaluation", async () => {
    const time = new VirtualClock();
    const metrics = new RecordingMetrics();
    const store = new MemoryLeaseStore();
    await createLeaseGate(settingsFor("other"), { store, metrics: new RecordingMetrics(), clock: time.skewed() }).acquireOrKeep();
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics, clock: time.skewed() });

    await expect(gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);

    expect(metrics.values(METRIC.paused)).toContain(1);
  });

  it("opens without any store traffic while the held validity covers the attempt", async () => {
    const time = new VirtualClock();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    await gate.acquireOrKeep();
    const callsAfterAcquire = calls.length;
    time.advance(15_000);

    await gate.assertOpen(1, 10_000);

    expect(calls.length).toBe(callsAfterAcquire);
  });

  it("keeps the lease first when the remaining validity does not cover the next attempt", async () => {
    const time = new VirtualClock();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    await gate.acquireOrKeep();
    time.advance(15_001);

    await gate.assertOpen(1, 10_000);

    expect(calls).toEqual(["extend", "claim", "markAnnounced", "extend"]);
  });

  it("counts validity from before the write was sent, so a slow write shortens it", async () => {
    const time = new VirtualClock();
    const clock = time.skewed();
    const { store } = instrumented(new MemoryLeaseStore(), clock, 4_000);
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock });

    const outcome = await gate.acquireOrKeep();

    // extend (fails, absent), claim, then the term's announcement marker: 4 s each;
    // validity = 30 s - 5 s skew, counted from the claim's send, so 8 s are gone on return.
    expect(outcome).toMatchObject({ holding: true, validForMs: 17_000 });
  });

  it("does not let a forward jump of the holder's wall clock stretch its validity", async () => {
    const time = new VirtualClock();
    let wallJump = 0;
    const base = time.skewed();
    const clock: Clock = { now: () => base.now() + wallJump, monotonic: () => base.monotonic(), sleep: (ms) => base.sleep(ms) };
    const gate = createLeaseGate(settingsFor("prod"), { store: new MemoryLeaseStore(), metrics: new RecordingMetrics(), clock });
    await gate.acquireOrKeep();

    wallJump = -3_600_000;
    time.advance(25_001);

    await expect(gate.assertOpen(1, 1)).resolves.toMatchObject({ term: 1 });
    expect((await gate.acquireOrKeep()).holding).toBe(true);
  });

  it("refuses an attempt longer than one lease validity with a clear reason", async () => {
    const gate = createLeaseGate(settingsFor("prod"), { store: new MemoryLeaseStore(), metrics: new RecordingMetrics(), clock: new VirtualClock().skewed() });
    await gate.acquireOrKeep();

    await expect(gate.assertOpen(1, 25_001)).rejects.toThrow(/cannot fit in one lease validity of 25000 ms/);
  });

  it("fails stale work with LeaseLostError while the deployment still leads under a newer term", async () => {
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics, clock: time.skewed() });
    await gate.acquireOrKeep();
    await gate.release();
    time.advance(40_000);
    await createLeaseGate(settingsFor("other"), { store, metrics: new RecordingMetrics(), clock: time.skewed() }).acquireOrKeep();
    time.advance(40_000);
    await gate.acquireOrKeep();

    await expect(gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
    expect(metrics.lastGauge(METRIC.paused)).toBe(0);
    expect(metrics.lastGauge(EXTRA_METRIC.leaseTerm)).toBe(3);
  });

  it("calls onWon once per newly won term, and shares one round trip between concurrent callers", async () => {
    const time = new VirtualClock();
    const won: number[] = [];
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.skewed(), onWon: (term) => void won.push(term) });

    await Promise.all([gate.assertOpen(1, 1_000), gate.assertOpen(1, 1_000), gate.currentTerm()]);
    time.advance(10_000);
    await gate.acquireOrKeep();

    expect(won).toEqual([1]);
    expect(calls).toEqual(["extend", "claim", "markAnnounced", "extend"]);
  });
});

describe("pause gate across invocations, freezes and releases", () => {
  it("a thawed container does not open on a lease that moved while it was frozen, even if its monotonic clock did not advance", async () => {
    // Arrange: the leader's container is frozen; its monotonic clock stands still, wall time moves on.
    const time = new VirtualClock();
    let frozenFor = 0;
    const base = time.skewed();
    const thawing: Clock = { now: () => base.now(), monotonic: () => base.monotonic() - frozenFor, sleep: (ms) => base.sleep(ms) };
    const store = new MemoryLeaseStore();
    const leader = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: thawing });
    await leader.acquireOrKeep();
    time.advance(60_000);
    frozenFor = 60_000;
    await createLeaseGate(settingsFor("standby"), { store, metrics: new RecordingMetrics(), clock: time.skewed() }).acquireOrKeep();

    // Act
    const opened = leader.assertOpen(1, 1_000);

    // Assert
    await expect(opened).rejects.toBeInstanceOf(PausedError);
    expect(store.snapshot("eu")).toMatchObject({ holder: "standby", term: 2 });
  });

  it("the first gate read of each invocation is a round against the store, whatever validity is cached", async () => {
    // Arrange
    const time = new VirtualClock();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    gate.beginInvocation();
    await gate.assertOpen(1, 1_000);
    const before = calls.length;

    // Act: a second invocation of the warm container, one second later.
    time.advance(1_000);
    gate.beginInvocation();
    await gate.assertOpen(1, 1_000);
    await gate.assertOpen(1, 1_000);

    // Assert: one keep for the new invocation, none for its second attempt.
    expect(calls.slice(before)).toEqual(["extend"]);
  });

  it("a cold container of the leading deployment does not win the term again: onWon runs once per term for the whole deployment", async () => {
    // Arrange: two containers of one deployment.
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const won: string[] = [];
    const container = (name: string) =>
      createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock: time.skewed(), onWon: (term) => void won.push(`${name}:${term}`) });
    const first = container("first");
    await first.acquireOrKeep();

    // Act
    const cold = await container("cold").acquireOrKeep();

    // Assert
    expect(cold).toMatchObject({ holding: true, term: 1, wonNewTerm: false, tookOver: false });
    expect(won).toEqual(["first:1"]);
  });

  it("release: no container of the releasing deployment keeps the term, and the standby claims only after the expiry every sibling counted on", async () => {
    // Arrange: two containers of "prod" hold term 1; "standby" contests.
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const gate = (deploymentId: string) => createLeaseGate(settingsFor(deploymentId), { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    const releasing = gate("prod");
    const sibling = gate("prod");
    const standby = gate("standby");
    await releasing.acquireOrKeep();
    time.advance(5_000);
    await sibling.acquireOrKeep();
    const expiry = store.snapshot("eu")!.expiresAt;

    // Act
    const released = await releasing.release();
    time.advance(1_000);
    const siblingKeep = await sibling.acquireOrKeep();
    const standbyAtOnce = await standby.acquireOrKeep();
    time.advance(expiry + 5_000 - time.trueTime + 1);
    const standbyAfterExpiry = await standby.acquireOrKeep();

    // Assert
    expect(released).toBe(true);
    await expect(releasing.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
    expect(siblingKeep.holding).toBe(false);
    expect(standbyAtOnce.holding).toBe(false);
    expect(standbyAfterExpiry).toMatchObject({ holding: true, term: 2 });
  });

  it("a challenger also waits out the delivery horizon (the request TTL) past expiry", async () => {
    // Arrange
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const withHorizon = (deploymentId: string) =>
      createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId, deliveryHorizonMs: 30_000 }), {
        store,
        metrics: new RecordingMetrics(),
        clock: time.skewed(),
      });
    await withHorizon("prod").acquireOrKeep();
    const challenger = withHorizon("standby");

    // Act
    time.advance(30_000 + 5_000 + 1);
    const afterSkew = await challenger.acquireOrKeep();
    time.advance(30_000);
    const afterHorizon = await challenger.acquireOrKeep();

    // Assert
    expect(afterSkew.holding).toBe(false);
    expect(afterHorizon).toMatchObject({ holding: true, term: 2 });
  });

  it.each([
    { case: "the holder's", holder: { skewBoundMs: 10_000, deliveryHorizonMs: 120_000 }, standby: { skewBoundMs: 5_000, deliveryHorizonMs: 30_000 } },
    { case: "the standby's own", holder: { skewBoundMs: 5_000, deliveryHorizonMs: 30_000 }, standby: { skewBoundMs: 8_000, deliveryHorizonMs: 60_000 } },
  ])("a standby's round reports when the lease becomes claimable, with $case larger bounds: claiming then succeeds, 1 ms before it does not", async ({ holder, standby }) => {
    // Arrange
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const gateOf = (deploymentId: string, bounds: { skewBoundMs: number; deliveryHorizonMs: number }) =>
      createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId, ...bounds }), { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    await gateOf("east", holder).acquireOrKeep();
    const expiresAt = store.snapshot("eu")!.expiresAt;
    const challenger = gateOf("west", standby);
    const expected = expiresAt + Math.max(holder.skewBoundMs, standby.skewBoundMs) + Math.max(holder.deliveryHorizonMs, standby.deliveryHorizonMs) + 1;

    // Act
    const seen = await challenger.acquireOrKeep();
    time.advance(expected - 1 - time.now());
    const justBefore = await challenger.acquireOrKeep();
    time.advance(1);
    const atClaimable = await challenger.acquireOrKeep();

    // Assert
    expect(seen).toMatchObject({ holding: false, claimableAt: expected });
    expect(justBefore).toMatchObject({ holding: false, claimableAt: expected });
    expect(atClaimable).toMatchObject({ holding: true, term: 2, tookOver: true });
    expect(store.snapshot("eu")).toMatchObject({ holder: "west", term: 2 });
  });

  it("a holder's round reports no claimable moment, and a round that finds no lease claims it at once", async () => {
    // Arrange
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const gate = createLeaseGate(settingsFor("east"), { store, metrics: new RecordingMetrics(), clock: time.skewed() });

    // Act
    const first = await gate.acquireOrKeep();
    time.advance(10_000);
    const kept = await gate.acquireOrKeep();

    // Assert
    expect(first).toMatchObject({ holding: true, term: 1, tookOver: true });
    expect(kept).toMatchObject({ holding: true, term: 1, tookOver: false });
    expect(kept).not.toHaveProperty("claimableAt");
  });

  it("a round that outlives its bound and lands in the next invocation never makes the holder a standby", async () => {
    // Arrange: the keep of the second invocation is answered only when the test lets it.
    const time = new VirtualClock();
    const inner = new MemoryLeaseStore();
    let answerLate: () => void = () => {};
    let holdNextExtend = false;
    const store: LeaseStore = {
      claim: (request) => inner.claim(request),
      read: (site) => inner.read(site),
      release: (request) => inner.release(request),
      markAnnounced: (request) => inner.markAnnounced(request),
      recordPeer: (request) => inner.recordPeer(request),
      extend: async (request) => {
        if (!holdNextExtend) return inner.extend(request);
        holdNextExtend = false;
        await new Promise<void>((resolve) => (answerLate = resolve));
        return inner.extend(request);
      },
    };
    const settings = resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: "prod", roundTimeoutMs: 20 });
    const gate = createLeaseGate(settings, { store, metrics: new RecordingMetrics(), clock: time.skewed() });
    await gate.acquireOrKeep();
    gate.beginInvocation();
    holdNextExtend = true;
    const lateInvocation = await gate.standing();

    // Act: the next invocation asks while the late round is still out, then the round lands.
    gate.beginInvocation();
    const standing = gate.standing();
    answerLate();

    // Assert: unknown at worst (the batch goes back), and a round of its own confirms it leads.
    expect(lateInvocation.kind).toBe("unknown");
    expect((await standing).kind).not.toBe("standby");
    expect(await gate.standing()).toEqual({ kind: "leading", term: 1 });
  });

  it("a challenger waits the holder's longer delivery horizon and skew bound, and reports that the bounds differ", async () => {
    // Arrange: A sends 120 s requests with a 10 s skew bound; B is configured for 30 s and 5 s.
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const logger = new RecordingLogger();
    const metrics = new RecordingMetrics();
    const gateOf = (deploymentId: string, horizonMs: number, skewBoundMs: number, deps: { logger?: RecordingLogger; metrics?: RecordingMetrics } = {}) =>
      createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId, deliveryHorizonMs: horizonMs, skewBoundMs }), {
        store,
        metrics: deps.metrics ?? new RecordingMetrics(),
        logger: deps.logger,
        clock: time.skewed(),
      });
    await gateOf("a", 120_000, 10_000).acquireOrKeep();
    const b = gateOf("b", 30_000, 5_000, { logger, metrics });

    // Act
    time.advance(30_000 + 5_000 + 30_000 + 1);
    const pastOwnBounds = await b.acquireOrKeep();
    time.advance(120_000 + 10_000 - 35_000);
    const pastHolderBounds = await b.acquireOrKeep();

    // Assert
    expect(store.snapshot("eu")).toMatchObject({ holder: "b", skewBoundMs: 5_000, deliveryHorizonMs: 30_000 });
    expect(pastOwnBounds.holding).toBe(false);
    expect(pastHolderBounds).toMatchObject({ holding: true, term: 2 });
    expect(metrics.total(EXTRA_METRIC.leaseSettingsMismatch)).toBeGreaterThan(0);
    expect(logger.at("warn").filter((line) => /bounds differ from the holder's/.test(line.message))).toHaveLength(1);
  });

  it("a standby counts the bounds mismatch while a holder's rollout from rpc_ttl 120 s to its own 30 s still has 120 s requests to wait for, and stops by itself once they are past", async () => {
    // Arrange: the holder's old container (120 s) claims, then only its rolled-out one (30 s) keeps it.
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const logger = new RecordingLogger();
    const metrics = new RecordingMetrics();
    const gateOf = (deploymentId: string, horizonMs: number, deps: { logger?: RecordingLogger; metrics?: RecordingMetrics } = {}) =>
      createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId, deliveryHorizonMs: horizonMs }), {
        store,
        metrics: deps.metrics ?? new RecordingMetrics(),
        logger: deps.logger,
        clock: time.skewed(),
      });
    await gateOf("east", 120_000).acquireOrKeep();
    const rolledOut = gateOf("east", 30_000);
    const standby = gateOf("west", 30_000, { logger, metrics });

    // Act: every 10 s the rolled-out container keeps the term and the standby looks.
    const countedPerRound: number[] = [];
    for (let round = 0; round < 11; round++) {
      time.advance(10_000);
      await rolledOut.acquireOrKeep();
      const before = metrics.total(EXTRA_METRIC.leaseSettingsMismatch);
      await standby.acquireOrKeep();
      countedPerRound.push(metrics.total(EXTRA_METRIC.leaseSettingsMismatch) - before);
    }

    // Assert: the old container's last expiry + 120 s is reached by 30 s keeps after 90 s (the 9th round).
    expect(countedPerRound).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
    expect(store.snapshot("eu")).toMatchObject({ holder: "east", term: 1, deliveryHorizonMs: 30_000 });
    expect(logger.at("warn").filter((line) => /bounds differ from the holder's/.test(line.message))).toHaveLength(1);
  });

  it("each round records its deployment among the lease's peers, and one not in lease.peers is reported loudly", async () => {
    // Arrange: east leads and expects west; a third deployment turns up.
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    const logger = new RecordingLogger();
    const metrics = new RecordingMetrics();
    const gateOf = (deploymentId: string, knownPeers: string[], deps: { logger?: RecordingLogger; metrics?: RecordingMetrics } = {}) =>
      createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId, knownPeers }), {
        store,
        metrics: deps.metrics ?? new RecordingMetrics(),
        logger: deps.logger,
        clock: time.skewed(),
      });
    const east = gateOf("east", ["west"], { logger, metrics });
    await east.acquireOrKeep();
    await gateOf("west", ["east"]).acquireOrKeep();
    const westOnly = metrics.total(EXTRA_METRIC.leaseUnknownPeers);

    // Act
    await gateOf("stray", []).acquireOrKeep();
    time.advance(1_000);
    await east.acquireOrKeep();
    await east.acquireOrKeep();

    // Assert
    expect(Object.keys(store.snapshot("eu")?.peers ?? {}).sort()).toEqual(["east", "stray", "west"]);
    expect(westOnly).toBe(0);
    expect(metrics.total(EXTRA_METRIC.leaseUnknownPeers)).toBe(2);
    expect(logger.at("error").filter((line) => line.attributes?.peer === "stray")).toHaveLength(1);
  });

  it("a stalled store closes the gate within the round bound instead of waiting forever", async () => {
    // Arrange: every store call hangs (TCP open, no bytes).
    const hung = () => new Promise<never>(() => undefined);
    const stalled: LeaseStore = { claim: hung, extend: hung, release: hung, markAnnounced: hung, recordPeer: hung, read: hung };
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: "eu", deploymentId: "prod", roundTimeoutMs: 50 }), {
      store: stalled,
      metrics,
      clock: new VirtualClock().skewed(),
    });

    // Act
    const opened = gate.assertOpen(1, 1_000);

    // Assert
    await expect(opened).rejects.toBeInstanceOf(PausedError);
    expect(metrics.total(EXTRA_METRIC.leaseStoreErrors)).toBeGreaterThan(0);
  });
});

describe("lease rounds every keep interval, as the ticks run them", () => {
  it("keep the lease at every tick and none comes after the last armed one", async () => {
    const time = new VirtualClock();
    const clock = time.skewed();
    const { store, calls } = instrumented(new MemoryLeaseStore());
    const gate = createLeaseGate(settingsFor("prod"), { store, metrics: new RecordingMetrics(), clock });
    const until = clock.monotonic() + 58_000;

    const summary = await keepLeaseByTicks({ lease: gate, clock, until, intervalMs: 10_000 });

    expect(summary).toEqual({ rounds: 6, heldRounds: 6, failedRounds: 0, staleTicks: 0, wonTerms: [1] });
    expect(calls.filter((call) => call === "extend")).toHaveLength(6);
    expect(clock.monotonic()).toBeLessThanOrEqual(until);
  });

  it("take over as a standby once the leader stops keeping the lease, and report the won term", async () => {
    const time = new VirtualClock();
    const store = new MemoryLeaseStore();
    await createLeaseGate(settingsFor("crashed"), { store, metrics: new RecordingMetrics(), clock: time.skewed() }).acquireOrKeep();
    const clock = time.skewed();
    const standby = createLeaseGate(settingsFor("standby"), { store, metrics: new RecordingMetrics(), clock });
    const won: number[] = [];

    const summary = await keepLeaseByTicks({ lease: standby, clock, until: clock.monotonic() + 58_000, intervalMs: 10_000, onWon: (term) => void won.push(term) });

    // Rounds at 0..50 s; the lease written at 0 s may be taken over after 35 s, so the 40 s round wins.
    expect(won).toEqual([2]);
    expect(summary).toMatchObject({ rounds: 6, heldRounds: 2, wonTerms: [2] });
  });

  it("go on through store failures, counting them", async () => {
    const time = new VirtualClock();
    const clock = time.skewed();
    const metrics = new RecordingMetrics();
    const gate = createLeaseGate(settingsFor("prod"), { store: unusableStore, metrics, clock });

    const summary = await keepLeaseByTicks({ lease: gate, clock, until: clock.monotonic() + 30_000, intervalMs: 10_000 });

    expect(summary).toMatchObject({ rounds: 3, heldRounds: 0, failedRounds: 3 });
    expect(metrics.total(EXTRA_METRIC.leaseStoreErrors)).toBe(3);
    expect(metrics.lastGauge(METRIC.paused)).toBe(1);
  });
});
