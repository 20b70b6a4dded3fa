import { describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { LifecycleBridge, LifecycleEvents } from "../../../lib/app/lifecycle-events";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { brokerEvent, FakeLifecycleEventSource, failedIds, VirtualClock } from "../../support/fakes";
import { COMPONENT, shared, startupEvent, unreachableLeaseStore, world, type World } from "./support";

const SKEW_BOUND_MS = 5_000;

function lifecycleEvents(w: World): LifecycleEvents {
  const { gate, admission, registry, logger, metrics } = w;
  return new LifecycleEvents({ component: COMPONENT, gate, admission, registry, skewBoundMs: SKEW_BOUND_MS, allowShortIdentities: false, lifecycleDlq: w.queues.lifecycleDlq, logger, metrics });
}

/** Provisions `identity` now, with credentials issued now, as the provision function records it. */
async function provisioned(w: World, identity: string): Promise<void> {
  const begun = await w.registry.begin((await w.registry.admit(identity, "discovery", 1))!, 1);
  if (begun.status !== "claimed") throw new Error(begun.status);
  await w.registry.complete(begun.claim, "provisioned", { expiresAt: w.clock.now() + 3_600_000, kind: "server_jwt", issuedAt: w.clock.now() });
}

describe("lifecycle events: a queued startup event becomes host work", () => {
  it("admits the node under the current term and queues its work with source event", async () => {
    // Arrange
    const w = world();
    const messages = ["a.example.net", "b.example.net"].map((identity) => w.queues.lifecycle.delivery(startupEvent(identity, w.clock)));

    // Act
    const result = await lifecycleEvents(w).handle(messages);

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.bodies().map(decodeHostWork)).toEqual(
      expect.arrayContaining([
        { identity: "a.example.net", term: 1, admittedAt: w.clock.now(), source: "event" },
        { identity: "b.example.net", term: 1, admittedAt: w.clock.now(), source: "event" },
      ]),
    );
    expect(w.metrics.total(METRIC.eventDiscovered)).toBe(2);
    expect(w.metrics.total(EXTRA_METRIC.lifecycleEventsReceived)).toBe(2);
  });

  it("drops a startup event the node sent before it was last provisioned, as after a failover, and admits a later one", async () => {
    // Arrange: the event of a node waiting in provisioning mode, then its provisioning 2 minutes later.
    const w = world();
    const stale = w.queues.lifecycle.delivery(startupEvent("a.example.net", w.clock));
    w.clock.advance(120_000);
    await provisioned(w, "a.example.net");
    w.clock.advance(120_000);
    const fresh = w.queues.lifecycle.delivery(startupEvent("a.example.net", w.clock));

    // Act
    const dropped = await lifecycleEvents(w).handle([stale]);
    const queuedAfterStale = w.queues.hostWork.sent.length;
    const admitted = await lifecycleEvents(w).handle([fresh]);

    // Assert: the stale one leaves the host provisioned; the node's new announcement is admitted.
    expect(dropped.failedMessageIds).toEqual([]);
    expect(queuedAfterStale).toBe(0);
    expect(w.metrics.total(EXTRA_METRIC.lifecycleEventsStale)).toBe(1);
    expect(admitted.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.sent).toHaveLength(1);
  });

  it("admits an event from within the clock skew bound of the provisioning: the node's clock may be behind", async () => {
    // Arrange
    const w = world();
    await provisioned(w, "a.example.net");
    w.clock.advance(2 * 60_000);
    const behind = new VirtualClock(w.clock.now() - 2 * 60_000 + SKEW_BOUND_MS - 1_000);

    // Act
    await lifecycleEvents(w).handle([w.queues.lifecycle.delivery(startupEvent("a.example.net", behind))]);

    // Assert
    expect(w.metrics.total(EXTRA_METRIC.lifecycleEventsStale)).toBe(0);
  });

  it("ignores other components' events and other event types without failing them", async () => {
    // Arrange
    const w = world();
    const other = w.queues.lifecycle.delivery(startupEvent("a.example.net", w.clock, "server"));

    // Act
    const result = await lifecycleEvents(w).handle([other]);

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.sent).toEqual([]);
  });

  it("sends poison to the lifecycle DLQ with its reason and acknowledges it", async () => {
    // Arrange
    const w = world();
    const poison = w.queues.lifecycle.delivery("{not json");

    // Act
    const result = await lifecycleEvents(w).handle([poison]);

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.lifecycleDlq.sent).toEqual([
      {
        body: "{not json",
        attributes: { reason: expect.any(String), sourceMessageId: poison.id, sourceQueue: w.queues.lifecycle.url },
      },
    ]);
  });

  it("a standby drops the event (the leader hears it too) and counts it", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const standby = world({ deploymentId: "east", shared: site });

    // Act
    const result = await lifecycleEvents(standby).handle([standby.queues.lifecycle.delivery(startupEvent("a.example.net", standby.clock))]);

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(standby.queues.hostWork.sent).toEqual([]);
    expect(standby.metrics.total(EXTRA_METRIC.lifecycleEventsDropped)).toBe(1);
  });

  it("hands every event back when the lease store cannot be read", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });
    const messages = ["a.example.net", "b.example.net"].map((identity) => w.queues.lifecycle.delivery(startupEvent(identity, w.clock)));

    // Act
    const result = await lifecycleEvents(w).handle(messages);

    // Assert
    expect(failedIds(result)).toEqual(messages.map((message) => message.id).sort());
    expect(w.queues.hostWork.sent).toEqual([]);
  });

  it("hands the event back when its work could not be queued, and withdraws the admission", async () => {
    // Arrange
    const w = world();
    w.queues.hostWork.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    const message = w.queues.lifecycle.delivery(startupEvent("a.example.net", w.clock));

    // Act
    const first = await lifecycleEvents(w).handle([message]);
    w.queues.hostWork.refuse = () => undefined;
    const redelivered = await lifecycleEvents(w).handle([{ ...message, receiveCount: 2 }]);

    // Assert
    expect(first.failedMessageIds).toEqual([message.id]);
    expect(redelivered.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).toEqual(["a.example.net"]);
  });
});

function bridge(w: World, source: FakeLifecycleEventSource): LifecycleBridge {
  return new LifecycleBridge({
    gate: w.gate,
    source,
    events: lifecycleEvents(w),
    lifecycleDlq: w.queues.lifecycleDlq,
    logger: w.logger,
    metrics: w.metrics,
  });
}

/** Monotonic ms `ms` from now on the world's clock: how long a tick's bridge runs. */
function inMs(w: World, ms: number): number {
  return w.clock.monotonic() + ms;
}

/** The identities of the host work queued, sorted. */
function queuedIdentities(w: World): string[] {
  return w.queues.hostWork
    .bodies()
    .map((body) => decodeHostWork(body).identity)
    .sort();
}

describe("the lifecycle bridge: broker events -> admission, in the tick", () => {
  it("admits every event while this deployment leads, in-process, reading until the time it was given", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const [a, b, c] = ["a.example.net", "b.example.net", "c.example.net"].map((identity) => brokerEvent(startupEvent(identity, w.clock)));
    const source = new FakeLifecycleEventSource([[a!, b!], [c!]]);
    const until = inMs(w, 8_000);

    // Act
    const result = await bridge(w, source).run(until);

    // Assert: the hosts' work is queued under the term; nothing went through the lifecycle queue.
    expect(result).toEqual({ mode: "jetstream", handled: 3, deadLettered: 0, paused: false });
    expect(source.outcomes).toEqual([["handled", "handled"], ["handled"]]);
    expect(queuedIdentities(w)).toEqual(["a.example.net", "b.example.net", "c.example.net"]);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).term))).toEqual(new Set([1]));
    expect(w.queues.lifecycle.sent).toEqual([]);
    expect(source.runs[0]?.until).toBe(until);
  });

  it("reads nothing while another deployment leads: the events stay with the broker for the leader", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const standby = world({ deploymentId: "east", shared: site });
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", standby.clock))]]);

    // Act
    const result = await bridge(standby, source).run(inMs(standby, 8_000));

    // Assert
    expect(result).toEqual({ mode: "jetstream", handled: 0, deadLettered: 0, paused: true });
    expect(source.pending).toHaveLength(1);
    expect(standby.queues.hostWork.sent).toEqual([]);
  });

  it("reads nothing when the lease store cannot be read: the gate's standing is unknown", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });
    const unreadable = new FakeLifecycleEventSource([[brokerEvent(startupEvent("b.example.net", w.clock))]]);

    // Act
    const storeDown = await bridge(w, unreadable).run(inMs(w, 8_000));

    // Assert
    expect(storeDown.paused).toBe(true);
    expect(unreadable.pending).toHaveLength(1);
    expect(w.queues.hostWork.sent).toEqual([]);
    expect(w.logger.at("warn").map((line) => line.message)).toContain("paused: the lease store could not be read, not taking lifecycle events");
  });

  it("without leader election always leads", async () => {
    // Arrange
    const w = world({ leaderElection: false });
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", w.clock))]], "core");

    // Act
    const result = await bridge(w, source).run(inMs(w, 8_000));

    // Assert
    expect(result).toEqual({ mode: "core", handled: 1, deadLettered: 0, paused: false });
    expect(w.queues.hostWork.bodies().map(decodeHostWork)).toEqual([{ identity: "a.example.net", term: 0, admittedAt: w.clock.now(), source: "event" }]);
  });

  it("acknowledges poison once admission has dead-lettered it with its reason, and admits the good events", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", w.clock)), brokerEvent("{not json")]]);

    // Act
    const result = await bridge(w, source).run(inMs(w, 8_000));

    // Assert
    expect(result).toMatchObject({ handled: 2, deadLettered: 0 });
    expect(source.outcomes).toEqual([["handled", "handled"]]);
    expect(queuedIdentities(w)).toEqual(["a.example.net"]);
    expect(w.queues.lifecycleDlq.sent).toEqual([
      { body: "{not json", attributes: { reason: expect.any(String), sourceMessageId: expect.any(String), sourceQueue: "choria.lifecycle.event.startup.provision_mode_server" } },
    ]);
  });

  it("dead-letters an event whose bytes are not UTF-8 whole (base64), not as replacement characters, and admits the good events", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const garbage = Uint8Array.from([0x7b, 0xff, 0xfe, 0x7d]);
    const subject = "choria.lifecycle.event.startup.provision_mode_server";
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", w.clock)), { data: garbage, subject, lastChance: false }]]);

    // Act
    const result = await bridge(w, source).run(inMs(w, 8_000));

    // Assert
    expect(source.outcomes).toEqual([["handled", "dead-lettered"]]);
    expect(result).toMatchObject({ handled: 1, deadLettered: 1 });
    expect(queuedIdentities(w)).toEqual(["a.example.net"]);
    expect(w.queues.lifecycleDlq.sent).toEqual([
      {
        body: Buffer.from(garbage).toString("base64"),
        attributes: { reason: "not a lifecycle event: not UTF-8 text", encoding: "base64", originalBytes: "4", truncated: "false", subject, source: "lifecycle-bridge" },
      },
    ]);
  });

  it("hands an event admission could not take back for redelivery, and dead-letters it (base64, with the reason) on its last chance", async () => {
    // Arrange: the host-work queue throttles, so admission takes nothing.
    const w = world();
    await w.gate.acquireOrKeep();
    w.queues.hostWork.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    const last = startupEvent("b.example.net", w.clock);
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", w.clock)), brokerEvent(last, { lastChance: true })]]);

    // Act
    const result = await bridge(w, source).run(inMs(w, 8_000));

    // Assert
    expect(source.outcomes).toEqual([["retry", "dead-lettered"]]);
    expect(result).toMatchObject({ handled: 0, deadLettered: 1 });
    expect(w.queues.lifecycleDlq.sent).toEqual([
      {
        body: Buffer.from(last).toString("base64"),
        attributes: {
          reason: "admission did not take the lifecycle event on its last delivery",
          encoding: "base64",
          originalBytes: String(new TextEncoder().encode(last).length),
          truncated: "false",
          subject: "choria.lifecycle.event.startup.provision_mode_server",
          source: "lifecycle-bridge",
        },
      },
    ]);
    expect(w.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered)).toBe(1);
  });

  it("hands an event back when the DLQ refuses it too", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    w.queues.hostWork.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    w.queues.lifecycleDlq.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    const source = new FakeLifecycleEventSource([[brokerEvent(startupEvent("a.example.net", w.clock), { lastChance: true })]]);

    // Act
    const result = await bridge(w, source).run(inMs(w, 8_000));

    // Assert
    expect(source.outcomes).toEqual([["retry"]]);
    expect(result).toMatchObject({ handled: 0, deadLettered: 0 });
    expect(w.queues.lifecycleDlq.sent).toEqual([]);
    expect(w.logger.at("error").map((line) => line.message)).toContain("could not dead-letter a lifecycle event admission did not take");
  });
});

describe("lifecycle admission of names that cannot be unique (docs/audit.md)", () => {
  it("quarantines a startup event of localhost or a short name instead of admitting it, and admits a full name", async () => {
    // Arrange
    const w = world();
    const events = lifecycleEvents(w);
    const messages = ["localhost.localdomain", "web12", "web12.example.net"].map((identity, index) => ({ id: `m${index}`, body: startupEvent(identity, w.clock), receiveCount: 1, receiptHandle: `r${index}` }));

    // Act
    const result = await events.handle(messages);

    // Assert
    expect(failedIds(result)).toEqual([]);
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).toEqual(["web12.example.net"]);
    const quarantined = (await w.registry.summary()).quarantined;
    expect(quarantined.map((host) => [host.identity, host.reason])).toEqual(
      expect.arrayContaining([
        ["localhost.localdomain", expect.stringContaining("localhost")],
        ["web12", expect.stringContaining("no domain part")],
      ]),
    );
  });
});
