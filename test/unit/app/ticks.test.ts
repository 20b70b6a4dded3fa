/**
 * Ticks (lib/app/ticks.ts): the keeper arms them on the lifecycle queue, each one a lease round
 * and, while this deployment leads, the startup events waiting on the broker.
 */
import { describe, expect, it, vi } from "vitest";
import { Leadership } from "../../../lib/app/leadership";
import type { BridgeResult } from "../../../lib/app/lifecycle-events";
import { parseTick, Ticks, TickArming, type Tick } from "../../../lib/app/ticks";
import { systemClock } from "../../../lib/ports/clock";
import { silentLogger } from "../../../lib/ports/logger";
import type { LeaseOutcome } from "../../../lib/ports/lease-gate";
import { armedTicks, context, shared, SITE, tickArming, unreachableLeaseStore, world, type World } from "./support";

const R = 10_000;
const TIMING = { keepIntervalMs: R, armAheadMs: 60_000 };
const NOW = 1_700_000_000_000;
const HOLDING: LeaseOutcome = { holding: true, term: 3, wonNewTerm: false, tookOver: false, validForMs: 25_000 };

function standby(claimableAt?: number): LeaseOutcome {
  return { holding: false, current: undefined, ...(claimableAt === undefined ? {} : { claimableAt }) };
}

const IDLE: BridgeResult = { mode: "jetstream", handled: 0, deadLettered: 0, paused: false };

/** A bridge that takes nothing and records until when each run was to read. */
function recordingBridge() {
  const untils: number[] = [];
  return { untils, run: vi.fn(async (until: number) => (untils.push(until), IDLE)) };
}

/** The world's tick handling: the real gate, a recording bridge, ticks armed on its lifecycle queue. */
function ticksOf(w: World, arming: Pick<TickArming, "arm"> = tickArming(w, TIMING)) {
  const bridge = recordingBridge();
  const gate = { acquireOrKeep: vi.fn((remainingMs?: () => number) => w.gate.acquireOrKeep(remainingMs)) };
  const ticks = new Ticks({ gate, bridge, arming, keepIntervalMs: R, clock: w.clock, logger: w.logger });
  return { ticks, bridge, gate };
}

/** The delays (s) the keeper's arming gives the ticks `outcome` calls for at wall-clock `now`. */
async function tickDelays(outcome: LeaseOutcome, timing: typeof TIMING, now: number): Promise<number[]> {
  const delays: number[] = [];
  const queue = {
    sendAll: async (messages: ReadonlyArray<{ delaySeconds?: number }>) => {
      delays.push(...messages.map((message) => message.delaySeconds ?? 0));
      return messages.map(() => true);
    },
  };
  await new TickArming({ queue, timing, clock: { ...systemClock, now: () => now }, logger: silentLogger }).arm(outcome);
  return delays;
}

describe("the delays of the armed ticks", () => {
  it("a holder: one tick every keep interval up to the keeper's next run", async () => {
    expect(await tickDelays(HOLDING, TIMING, NOW)).toEqual([10, 20, 30, 40, 50, 60]);
    expect(await tickDelays(HOLDING, { keepIntervalMs: 2_000, armAheadMs: 10_000 }, NOW)).toEqual([2, 4, 6, 8, 10]);
    expect(await tickDelays(HOLDING, { keepIntervalMs: 3_000, armAheadMs: 10_000 }, NOW)).toEqual([3, 6, 9]);
  });

  it("a standby: one tick at the claimable moment, rounded up to whole seconds, at once when it has passed", async () => {
    expect(await tickDelays(standby(NOW + 35_001), TIMING, NOW)).toEqual([36]);
    expect(await tickDelays(standby(NOW + 35_000), TIMING, NOW)).toEqual([35]);
    expect(await tickDelays(standby(NOW - 5_000), TIMING, NOW)).toEqual([0]);
  });

  it("a standby: none beyond SQS's 900 s delay, and none without a claimable moment", async () => {
    expect(await tickDelays(standby(NOW + 900_000), TIMING, NOW)).toEqual([900]);
    expect(await tickDelays(standby(NOW + 900_001), TIMING, NOW)).toEqual([]);
    expect(await tickDelays(standby(), TIMING, NOW)).toEqual([]);
  });
});

describe("TickArming.arm", () => {
  it("sends the ticks in one SendMessageBatch, each delayed until it is due", async () => {
    // Arrange
    const w = world();
    const sendAll = vi.spyOn(w.queues.lifecycle, "sendAll");

    // Act
    const armed = await tickArming(w, TIMING).arm(HOLDING);

    // Assert
    expect(armed).toBe(6);
    expect(sendAll).toHaveBeenCalledTimes(1);
    expect(armedTicks(w.queues.lifecycle)).toEqual([10, 20, 30, 40, 50, 60].map((seconds) => ({ dueAt: w.clock.now() + seconds * 1000, delaySeconds: seconds })));
  });

  it("counts only the ticks SQS took", async () => {
    // Arrange
    const w = world();
    w.queues.lifecycle.refuse = (message) => (message.delaySeconds === 30 ? { accepted: false, permanent: false, reason: "throttled" } : undefined);

    // Act
    const armed = await tickArming(w, TIMING).arm(HOLDING);

    // Assert
    expect(armed).toBe(5);
    expect(armedTicks(w.queues.lifecycle).map((tick) => tick.delaySeconds)).toEqual([10, 20, 40, 50, 60]);
  });

  it("a send failure is logged, not thrown: nothing is armed and the next keeper run arms again", async () => {
    // Arrange
    const w = world();
    vi.spyOn(w.queues.lifecycle, "sendAll").mockRejectedValue(new Error("AWS.SimpleQueueService.NonExistentQueue"));

    // Act
    const armed = await tickArming(w, TIMING).arm(HOLDING);

    // Assert
    expect(armed).toBe(0);
    expect(w.logger.at("warn")).toEqual([
      { level: "warn", message: "could not arm the ticks; the next keeper run arms them again", attributes: { error: "AWS.SimpleQueueService.NonExistentQueue" } },
    ]);
  });

  it("sends nothing for a standby that saw no lease to claim", async () => {
    // Arrange
    const w = world();
    const sendAll = vi.spyOn(w.queues.lifecycle, "sendAll");

    // Act
    const armed = await tickArming(w, TIMING).arm(standby());

    // Assert
    expect(armed).toBe(0);
    expect(sendAll).not.toHaveBeenCalled();
  });
});

describe("Ticks.run", () => {
  it("skips ticks past their slot without a lease round", async () => {
    // Arrange
    const w = world();
    const { ticks, bridge, gate } = ticksOf(w);

    // Act
    const result = await ticks.run([{ dueAt: w.clock.now() - R - 1 }], context());

    // Assert
    expect(result).toEqual({ stale: 1, holding: false, armed: 0 });
    expect(gate.acquireOrKeep).not.toHaveBeenCalled();
    expect(bridge.run).not.toHaveBeenCalled();
    expect(await w.leaseStore.read(SITE)).toBeUndefined();
  });

  it("runs one round for the fresh ticks of a batch, however many", async () => {
    // Arrange: three ticks that arrived together after a delay, one of them past its slot.
    const w = world();
    await w.gate.acquireOrKeep();
    const { ticks, bridge, gate } = ticksOf(w);
    const now = w.clock.now();

    // Act
    const result = await ticks.run([{ dueAt: now - R - 1 }, { dueAt: now - 5_000 }, { dueAt: now }], context());

    // Assert
    expect(result).toEqual({ stale: 1, holding: true, bridged: IDLE, armed: 0 });
    expect(gate.acquireOrKeep).toHaveBeenCalledTimes(1);
    expect(bridge.run).toHaveBeenCalledTimes(1);
  });

  it("a round that took the lease over arms the rest of the minute; one that kept it arms nothing", async () => {
    // Arrange
    const w = world();
    const { ticks } = ticksOf(w);

    // Act
    const tookOver = await ticks.run([{ dueAt: w.clock.now() }], context());
    w.clock.advance(R);
    const kept = await ticks.run([{ dueAt: w.clock.now() }], context());

    // Assert
    expect(tookOver).toMatchObject({ holding: true, armed: 6 });
    expect(kept).toMatchObject({ holding: true, armed: 0 });
    expect(armedTicks(w.queues.lifecycle)).toHaveLength(6);
    expect(await w.leaseStore.read(SITE)).toMatchObject({ holder: "east", term: 1 });
  });

  it("a standby's round takes no events and arms nothing", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const east = world({ deploymentId: "east", shared: site });
    const { ticks, bridge } = ticksOf(east);

    // Act
    const result = await ticks.run([{ dueAt: east.clock.now() }], context());

    // Assert
    expect(result).toEqual({ stale: 0, holding: false, armed: 0 });
    expect(bridge.run).not.toHaveBeenCalled();
    expect(east.queues.lifecycle.sent).toEqual([]);
  });

  it("a standby's round that finds the lease claimable within a keep interval arms one tick for that moment", async () => {
    // Arrange: west kept the lease and then stopped; east's tick came 3 s before the lease is claimable.
    const site = shared();
    const west = world({ deploymentId: "west", shared: site });
    await west.gate.acquireOrKeep();
    const east = world({ deploymentId: "east", shared: site });
    const { ticks } = ticksOf(east);
    const seen = await east.gate.acquireOrKeep();
    const claimableAt = seen.holding ? 0 : (seen.claimableAt ?? 0);
    east.clock.advance(claimableAt - 3_000 - east.clock.now());

    // Act
    const early = await ticks.run([{ dueAt: east.clock.now() }], context());
    east.clock.advance(3_000);
    const due = await ticks.run([{ dueAt: east.clock.now() }], context());

    // Assert: one tick 3 s ahead, and the round at that moment takes the lease.
    expect(early).toMatchObject({ holding: false, armed: 1 });
    expect(armedTicks(east.queues.lifecycle)[0]?.delaySeconds).toBe(3);
    expect(due).toMatchObject({ holding: true });
    expect(await east.leaseStore.read(SITE)).toMatchObject({ holder: "east", term: 2 });
  });

  it("a holder takes events until a second before the next tick, or two before its deadline if that is sooner", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const { ticks, bridge } = ticksOf(w);
    const start = w.clock.monotonic();

    // Act
    await ticks.run([{ dueAt: w.clock.now() }], context(60_000));
    await ticks.run([{ dueAt: w.clock.now() }], context(5_000));

    // Assert
    expect(bridge.untils).toEqual([start + R - 1_000, start + 5_000 - 2_000]);
  });

  it("a broker the events cannot be taken from fails neither the tick nor the lease round", async () => {
    // Arrange
    const w = world();
    const bridge = { run: vi.fn(async () => Promise.reject(new Error("could not connect: AUTHORIZATION_VIOLATION"))) };
    const ticks = new Ticks({ gate: w.gate, bridge, arming: tickArming(w, TIMING), keepIntervalMs: R, clock: w.clock, logger: w.logger });

    // Act
    const result = await ticks.run([{ dueAt: w.clock.now() }], context());

    // Assert
    expect(result).toMatchObject({ holding: true, stale: 0 });
    expect(await w.leaseStore.read(SITE)).toMatchObject({ holder: "east", term: 1 });
    expect(w.logger.at("error").map((line) => line.message)).toContain("tick: could not take the lifecycle events; the next tick tries again");
  });

  it("a round the lease store fails is not thrown: no events are taken", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });
    const { ticks, bridge } = ticksOf(w);

    // Act
    const result = await ticks.run([{ dueAt: w.clock.now() }], context());

    // Assert
    expect(result).toEqual({ stale: 0, holding: false, armed: 0 });
    expect(bridge.run).not.toHaveBeenCalled();
  });
});

describe("parseTick", () => {
  it("reads back what the arming sends", async () => {
    // Arrange
    const w = world();
    await tickArming(w, TIMING).arm(HOLDING);

    // Act
    const parsed = w.queues.lifecycle.bodies().map(parseTick);

    // Assert
    expect(parsed).toEqual([10, 20, 30, 40, 50, 60].map((seconds) => ({ dueAt: w.clock.now() + seconds * 1000 })));
  });

  it.each([
    ["a startup event", JSON.stringify({ protocol: "io.choria.lifecycle.v1.startup", identity: "a.example.net", component: "provision_mode_server" })],
    ["plain text", "hello"],
    ["JSON null", "null"],
  ])("is undefined for a body that is not a tick: %s", (_, body) => {
    expect(parseTick(body)).toBeUndefined();
  });

  it.each([
    ["truncated JSON", '{"provisionerTick":{"dueAt":1'],
    ["a string time", '{"provisionerTick":{"dueAt":"1700000000000"}}'],
    ["no time", '{"provisionerTick":{}}'],
    ["a null tick", '{"provisionerTick":null}'],
    ["an infinite time", '{"provisionerTick":{"dueAt":1e999}}'],
    ["the name in an array", '["provisionerTick"]'],
  ])("is undefined for a malformed tick: %s", (_, body) => {
    expect(parseTick(body)).toBeUndefined();
  });
});

/** A deployment as the functions run it: its keeper (Leadership.keepLease) and its ticks, over the world. */
function deployment(w: World) {
  const arming = tickArming(w, TIMING);
  const keeper = new Leadership({
    settings: { leaderElection: true, identity: `provisioner.${w.deploymentId}`, discoveryMaxNodes: 1_000, discoveryNewNamesPerInterval: 1_000, discoveryIntervalMs: 60_000, discoveryBacklogMs: 0, allowShortIdentities: false, deadlineMarginMs: 1_000 },
    gate: w.gate,
    ticks: arming,
    broker: w.broker,
    admission: w.admission,
    registry: w.registry,
    hostWork: w.queues.hostWork,
    continuations: w.queues.lifecycle,
    clock: w.clock,
    logger: w.logger,
    metrics: w.metrics,
  });
  const { ticks } = ticksOf(w, arming);
  /** A new invocation of the lifecycle function given `tick` at its due time. */
  const deliver = async (tick: Tick) => {
    w.clock.advance(Math.max(0, tick.dueAt - w.clock.now()));
    w.gate.beginInvocation();
    return ticks.run([tick], context(30_000));
  };
  const keeperRun = () => {
    w.gate.beginInvocation();
    return keeper.keepLease(context(30_000));
  };
  return { keeperRun, deliver, armed: () => armedTicks(w.queues.lifecycle) };
}

describe("a lost tick or a lost keeper run is covered", () => {
  it("the lease outlives two lost ticks: the third keeps the term, and a standby could not take it meanwhile", async () => {
    // Arrange: east keeps the lease and arms the minute; west contests.
    const site = shared();
    const east = deployment(world({ deploymentId: "east", shared: site }));
    const west = world({ deploymentId: "west", shared: site });
    await east.keeperRun();
    const [, , third] = east.armed();

    // Act: the ticks at +10 s and +20 s are lost; west's round just before the third tick, then that tick.
    site.clock.advance(third!.dueAt - site.clock.now() - 1);
    const westJustBefore = await west.gate.acquireOrKeep();
    const result = await east.deliver(third!);

    // Assert
    expect(westJustBefore.holding).toBe(false);
    expect(result).toMatchObject({ stale: 0, holding: true, armed: 0 });
    expect(await site.leaseStore.read(SITE)).toMatchObject({ holder: "east", term: 1, expiresAt: site.clock.now() + 30_000 });
  });

  it("a tick whose invocation was killed comes back after the visibility timeout as stale and runs no round", async () => {
    // Arrange: the tick at +10 s runs, but its invocation dies before SQS hears of it.
    const w = world();
    const east = deployment(w);
    await east.keeperRun();
    const [first] = east.armed();
    await east.deliver(first!);
    const before = await w.leaseStore.read(SITE);

    // Act: the lifecycle queue's visibility timeout (180 s) later, the same tick again.
    w.clock.advance(180_000);
    const redelivered = await east.deliver(first!);

    // Assert
    expect(redelivered).toEqual({ stale: 1, holding: false, armed: 0 });
    expect(await w.leaseStore.read(SITE)).toEqual(before);
  });

  it("after a lost keeper run the next one arms the ticks again", async () => {
    // Arrange: the minute's ticks all come, then the next keeper run is lost.
    const w = world();
    const east = deployment(w);
    await east.keeperRun();
    for (const tick of east.armed()) await east.deliver(tick);
    w.clock.advance(60_000);
    const armedBefore = east.armed().length;

    // Act: the run after it.
    const result = await east.keeperRun();

    // Assert: the minute ahead is armed again, from now.
    expect(result).toEqual({ holding: true, armed: 6 });
    expect(east.armed().slice(armedBefore)).toEqual([10, 20, 30, 40, 50, 60].map((seconds) => ({ dueAt: w.clock.now() + seconds * 1000, delaySeconds: seconds })));
    expect(await w.leaseStore.read(SITE)).toMatchObject({ holder: "east", term: 1 });
  });
});
