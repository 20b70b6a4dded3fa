import { describe, expect, it, vi } from "vitest";
import { continuationBody, parseContinuation } from "../../../lib/app/discovery-continuation";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { LifecycleEvents } from "../../../lib/app/lifecycle-events";
import { LifecycleQueue } from "../../../lib/app/lifecycle-queue";
import { parseTick, type TickResult } from "../../../lib/app/ticks";
import { LEASE_DEFAULTS } from "../../../lib/lease/settings";
import { COMPONENT, context, leadership, shared, startupEvent, world, type World } from "./support";

const TICKED: TickResult = { stale: 0, holding: true, armed: 0 };

/** The lifecycle function's batch handling over `w`: its real events and leadership, ticks recorded. */
function lifecycleQueue(w: World) {
  const events = new LifecycleEvents({ component: COMPONENT, gate: w.gate, admission: w.admission, registry: w.registry, skewBoundMs: 5_000, allowShortIdentities: false, lifecycleDlq: w.queues.lifecycleDlq, logger: w.logger, metrics: w.metrics });
  const ticks = { run: vi.fn(async () => TICKED) };
  const useCase = leadership(w, { discoveryNewNamesPerInterval: 10 });
  return { queue: new LifecycleQueue({ events, ticks, leadership: useCase, logger: w.logger }), ticks, leadership: useCase };
}

const tickBody = (dueAt: number) => JSON.stringify({ provisionerTick: { dueAt } });
const fleet = (size: number) => Array.from({ length: size }, (_, i) => `node-${String(i).padStart(3, "0")}.example.net`);

describe("lifecycle queue: a batch of ticks, continuations and startup events", () => {
  it("runs a continuation of the current term as a discovery, and still handles the tick and the startup event beside it", async () => {
    // Arrange: the deployment leads term 1; the batch holds a startup event, a tick and a continuation of term 1 (twice: SQS may duplicate).
    const w = world();
    await w.gate.acquireOrKeep();
    w.broker.identities = fleet(5);
    const { queue, ticks } = lifecycleQueue(w);
    const tick = tickBody(w.clock.now());
    const continuation = continuationBody({ term: 1, until: w.clock.now() + 60_000 });
    const messages = [startupEvent("event.example.net", w.clock), tick, continuation, continuation].map((body) => w.queues.lifecycle.delivery(body));

    // Act
    const result = await queue.handle(messages, context(30_000));

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.lifecycleDlq.sent).toEqual([]);
    expect(ticks.run).toHaveBeenCalledWith([parseTick(tick)], expect.anything());
    expect(w.broker.discoveries).toBe(1);
    const queued = w.queues.hostWork.bodies().map(decodeHostWork);
    expect(queued.map((work) => work.identity).sort()).toEqual(["event.example.net", ...fleet(5)]);
    expect(new Set(queued.map((work) => work.term))).toEqual(new Set([1]));
  });

  it("drops a continuation of a term the deployment no longer holds, with an info log, and still takes the startup event", async () => {
    // Arrange: east led term 1; its lease lapsed and west took term 2.
    const site = shared();
    const east = world({ deploymentId: "east", shared: site });
    await east.gate.acquireOrKeep();
    east.clock.advance(LEASE_DEFAULTS.leaseDurationMs + LEASE_DEFAULTS.skewBoundMs + 1_000);
    const west = world({ deploymentId: "west", shared: site });
    await west.gate.acquireOrKeep();
    west.broker.identities = fleet(5);
    const { queue } = lifecycleQueue(west);
    const messages = [continuationBody({ term: 1, until: west.clock.now() + 60_000 }), startupEvent("event.example.net", west.clock)].map((body) => west.queues.lifecycle.delivery(body));

    // Act
    const result = await queue.handle(messages, context(30_000));

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(west.broker.discoveries).toBe(0);
    expect(west.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).toEqual(["event.example.net"]);
    expect(west.logger.at("info").find((line) => line.message.startsWith("dropping a discovery continuation"))?.attributes).toMatchObject({ term: 1 });
  });
});

describe("a continuation message", () => {
  it("reads back what was sent", () => {
    expect(parseContinuation(continuationBody({ term: 7, until: 1_700_000_060_000 }))).toEqual({ term: 7, until: 1_700_000_060_000 });
  });

  it.each([
    ["a tick", tickBody(1)],
    ["a startup event", JSON.stringify({ protocol: "io.choria.lifecycle.v1.startup", identity: "a.example.net", component: COMPONENT })],
    ["truncated JSON", '{"provisionerDiscoveryContinuation":{"term":1'],
    ["a null continuation", '{"provisionerDiscoveryContinuation":null}'],
    ["a negative term", '{"provisionerDiscoveryContinuation":{"term":-1,"until":1}}'],
    ["a fractional term", '{"provisionerDiscoveryContinuation":{"term":1.5,"until":1}}'],
    ["no end of the chain", '{"provisionerDiscoveryContinuation":{"term":1}}'],
    ["the name in an array", '["provisionerDiscoveryContinuation"]'],
  ])("is none for %s", (_, body) => {
    expect(parseContinuation(body)).toBeUndefined();
  });
});
