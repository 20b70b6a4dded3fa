import { describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { LifecycleBridge, LifecycleEvents } from "../../../lib/app/lifecycle-events";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { brokerEvent, FakeLifecycleEventSource, failedIds, VirtualClock } from "../../support/fakes";
import { COMPONENT, context, shared, SITE, startupEvent, unreachableLeaseStore, world, type World } from "./support";

const SKEW_BOUND_MS = 5_000;

function lifecycleEvents(w: World): LifecycleEvents {
  const { gate, admission, registry, logger, metrics } = w;
  return new LifecycleEvents({ component: COMPONENT, gate, admission, registry, skewBoundMs: SKEW_BOUND_MS, lifecycleDlq: w.queues.lifecycleDlq, logger, metrics });
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

function bridge(w: World, source: FakeLifecycleEventSource, leaseStore: LeaseStore = w.leaseStore): LifecycleBridge {
  return new LifecycleBridge({
    settings: { leaderElection: w.leaderElection, site: SITE, deploymentId: w.deploymentId, skewBoundMs: 5_000 },
    leaseStore,
    source,
    lifecycle: w.queues.lifecycle,
    lifecycleDlq: w.queues.lifecycleDlq,
    clock: w.clock,
    logger: w.logger,
    metrics: w.metrics,
  });
}

describe("the lifecycle bridge: broker events -> the lifecycle queue", () => {
  it("forwards every event while this deployment leads, reading until 2 s before the deadline", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const source = new FakeLifecycleEventSource([[brokerEvent("one"), brokerEvent("two")], [brokerEvent("three")]]);

    // Act
    const result = await bridge(w, source).run(context(10_000));

    // Assert
    expect(result).toEqual({ mode: "jetstream", forwarded: 3, deadLettered: 0, paused: false });
    expect(w.queues.lifecycle.bodies()).toEqual(["one", "two", "three"]);
    expect(source.runs[0]?.until).toBe(w.clock.monotonic() + 8_000);
  });

  it("reads nothing while another deployment leads: the events stay with the broker for the leader", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const standby = world({ deploymentId: "east", shared: site });
    const source = new FakeLifecycleEventSource([[brokerEvent("one")]]);

    // Act
    const result = await bridge(standby, source).run(context());

    // Assert
    expect(result).toEqual({ mode: "jetstream", forwarded: 0, deadLettered: 0, paused: true });
    expect(source.pending).toHaveLength(1);
    expect(standby.queues.lifecycle.sent).toEqual([]);
  });

  it("does not lead on a lease that expires within the skew bound, nor when the store cannot be read", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const stored = await w.leaseStore.read(SITE);
    w.clock.advance(stored!.expiresAt - w.clock.now() - 4_000);
    const expiring = new FakeLifecycleEventSource([[brokerEvent("one")]]);
    const unreadable = new FakeLifecycleEventSource([[brokerEvent("two")]]);

    // Act
    const nearExpiry = await bridge(w, expiring).run(context());
    const storeDown = await bridge(w, unreadable, unreachableLeaseStore()).run(context());

    // Assert
    expect(nearExpiry.paused).toBe(true);
    expect(storeDown.paused).toBe(true);
    expect(w.logger.at("warn").map((line) => line.message)).toContain("paused: the lease store could not be read, not bridging lifecycle events");
  });

  it("without leader election always leads", async () => {
    // Arrange
    const w = world({ leaderElection: false });
    const source = new FakeLifecycleEventSource([[brokerEvent("one")]], "core");

    // Act
    const result = await bridge(w, source).run(context());

    // Assert
    expect(result).toEqual({ mode: "core", forwarded: 1, deadLettered: 0, paused: false });
  });

  it("dead-letters what SQS can never take (base64, with the reason) and lets the good events through", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const refusal = { accepted: false as const, permanent: true, reason: "InvalidMessageContents" };
    w.queues.lifecycle.refuse = (message) => (message.body === "bad" ? refusal : undefined);
    const source = new FakeLifecycleEventSource([[brokerEvent("good"), brokerEvent("bad")]]);

    // Act
    const result = await bridge(w, source).run(context());

    // Assert
    expect(result).toMatchObject({ forwarded: 1, deadLettered: 1 });
    expect(source.outcomes).toEqual([["sent", "dead-lettered"]]);
    expect(w.queues.lifecycleDlq.sent).toEqual([
      {
        body: Buffer.from("bad").toString("base64"),
        attributes: {
          reason: "SQS refused the lifecycle event: InvalidMessageContents",
          encoding: "base64",
          originalBytes: "3",
          truncated: "false",
          subject: "choria.lifecycle.event.startup.provision_mode_server",
          source: "lifecycle-bridge",
        },
      },
    ]);
    expect(w.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered)).toBe(1);
  });

  it("hands a transient refusal back for redelivery, and dead-letters it on its last chance", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    w.queues.lifecycle.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    const source = new FakeLifecycleEventSource([[brokerEvent("early"), brokerEvent("last", { lastChance: true })]]);

    // Act
    const result = await bridge(w, source).run(context());

    // Assert
    expect(source.outcomes).toEqual([["retry", "dead-lettered"]]);
    expect(result).toMatchObject({ forwarded: 0, deadLettered: 1 });
  });

  it("hands an event back when the DLQ refuses it too", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    w.queues.lifecycle.refuse = () => ({ accepted: false, permanent: true, reason: "too large" });
    w.queues.lifecycleDlq.refuse = () => ({ accepted: false, permanent: false, reason: "throttled" });
    const source = new FakeLifecycleEventSource([[brokerEvent("x")]]);

    // Act
    const result = await bridge(w, source).run(context());

    // Assert
    expect(source.outcomes).toEqual([["retry"]]);
    expect(result).toMatchObject({ forwarded: 0, deadLettered: 0 });
    expect(w.logger.at("error").map((line) => line.message)).toContain("could not dead-letter a lifecycle event SQS refused");
  });
});
