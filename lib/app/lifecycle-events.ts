/**
 * Lifecycle events (docs/lifecycle.md): while this deployment leads, each tick's bridge takes the
 * startup events waiting on the broker, and each startup event of a node in provisioning mode
 * (taken by the bridge, or queued on the lifecycle queue) becomes admitted host work through the
 * admission flow (admission-flow.ts).
 */
import { parseLifecycleEvent, type LifecycleEvent } from "../choria/lifecycle";
import { messageOf } from "../errors";
import type { LeaseGate, Standing } from "../ports/lease-gate";
import { EXTRA_METRIC, METRIC } from "../ports/metric-names";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { AdmissionRegistry } from "../admission/registry";
import type { AdmissionFlow } from "./admission-flow";
import { deadLetter, RetryLaterError, runBatch } from "./batch";
import { uniquenessProblem } from "../choria/identity";
import type { BatchResult, BrokerEvent, ForwardOutcome, LifecycleEventSource, MessageQueue, QueueMessage } from "./use-case-ports";

/** A whole SQS batch at once would flood the registry table; admissions share discovery's bound. */
const ADMIT_CONCURRENCY = 16;

export interface LifecycleEventsDeps {
  /** The component whose startup events mean "a node in provisioning mode" (`lifecycle_component`). */
  component: string;
  gate: Pick<LeaseGate, "standing">;
  admission: Pick<AdmissionFlow, "admitAndEnqueue">;
  /** The credentials each host was last given: a startup event older than them is stale. */
  registry: Pick<AdmissionRegistry, "credentialsOf" | "quarantine">;
  /** `allow_short_identities`: names without a domain part are admitted, not quarantined. */
  allowShortIdentities: boolean;
  /** How far a node's clock may be behind ours (`lease.skew_bound`), besides the event's whole seconds. */
  skewBoundMs: number;
  lifecycleDlq: MessageQueue;
  logger: Logger;
  metrics: Metrics;
}

/** Queued lifecycle events -> admitted, queued host work under the current term. */
export class LifecycleEvents {
  constructor(private readonly deps: LifecycleEventsDeps) {}

  async handle(messages: readonly QueueMessage[]): Promise<BatchResult> {
    // One lease read for the whole batch, and only if an event needs the term.
    let standing: Promise<Standing> | undefined;
    const currentStanding = () => (standing ??= this.deps.gate.standing());
    return runBatch(messages, ADMIT_CONCURRENCY, (message) => this.handleOne(message, currentStanding), this.deps.logger);
  }

  private async handleOne(message: QueueMessage, currentStanding: () => Promise<Standing>): Promise<void> {
    const { logger, metrics } = this.deps;
    let event: LifecycleEvent;
    try {
      event = parseLifecycleEvent(new TextEncoder().encode(message.body));
    } catch (error) {
      await deadLetter(this.deps.lifecycleDlq, message, messageOf(error), logger);
      return;
    }
    if (event.type !== "startup" || event.component !== this.deps.component) {
      logger.debug("ignoring lifecycle event", { type: event.type, component: event.component, identity: event.identity });
      return;
    }
    const standing = await currentStanding();
    if (standing.kind === "unknown") {
      // A store blip is not a standby: the event comes back from SQS instead of being dropped.
      throw new RetryLaterError(`the lease store could not be read: ${messageOf(standing.error)}`, { cause: standing.error });
    }
    if (standing.kind === "standby") {
      metrics.count(EXTRA_METRIC.lifecycleEventsDropped);
      logger.info("paused: dropping lifecycle startup event", { identity: event.identity });
      return;
    }
    const term = standing.term;
    metrics.count(EXTRA_METRIC.lifecycleEventsReceived);
    if (await this.announcedBeforeProvisioned(event)) return;
    const problem = uniquenessProblem(event.identity, this.deps.allowShortIdentities);
    if (problem) {
      // Not admitted: the registry's quarantine holds it back on every deployment until the operator releases it.
      logger.error(`quarantined ${event.identity}: the identity ${problem}; release it with choria-provisioner quarantine release once resolved`, { identity: event.identity, term });
      await this.deps.registry.quarantine(event.identity, { reason: `the identity ${problem}`, senders: [{ event: "startup", announcedAt: event.timestamp * 1000 }] }, term, "event");
      return;
    }
    const result = await this.deps.admission.admitAndEnqueue([event.identity], "event", term);
    const failure = result.failed[0];
    if (failure) throw failure.error;
    const work = result.queued[0] ?? result.notQueued[0];
    if (!work) return;
    metrics.count(METRIC.eventDiscovered);
    logger.info("admitted host from its startup event", { identity: work.identity, term });
    if (result.notQueued.length > 0) throw new RetryLaterError(`could not queue work for ${work.identity}`);
  }

  /**
   * An event the node sent before it was last given credentials is stale: it announced a
   * provisioning that has happened since. A durable stream hands a new leader the events its
   * predecessor had not acknowledged, so after a failover these are common; admitted under the new
   * term, each would send a configured node through provisioning again, fail there, and leave the
   * registry saying the host is not provisioned, so renewal would pass it by.
   */
  private async announcedBeforeProvisioned(event: LifecycleEvent): Promise<boolean> {
    const credentials = await this.deps.registry.credentialsOf(event.identity);
    // The event's time is whole seconds on the node's clock: a second and the skew bound of slack.
    const announcedBy = event.timestamp * 1000 + 1000 + this.deps.skewBoundMs;
    if (credentials === undefined || announcedBy >= credentials.issuedAt) return false;
    this.deps.metrics.count(EXTRA_METRIC.lifecycleEventsStale);
    this.deps.logger.info("dropping a startup event the node sent before it was last provisioned", {
      identity: event.identity,
      announcedAt: event.timestamp * 1000,
      provisionedAt: credentials.issuedAt,
    });
    return true;
  }
}

export interface BridgeResult {
  mode: "jetstream" | "core";
  /** Events handed to admission and handled (admitted, already known, stale or not for us). */
  handled: number;
  /** Events admission could not take even on their last delivery: sent to the lifecycle DLQ with the reason. */
  deadLettered: number;
  /** This deployment did not lead when the run started: it read nothing. */
  paused: boolean;
}

export interface LifecycleBridgeDeps {
  /** Read before every fetch: the tick's own round confirmed the lease, so while it lasts no store is read. */
  gate: Pick<LeaseGate, "standing">;
  source: LifecycleEventSource;
  /** Where the events go: the same admission as a queued startup event's. */
  events: Pick<LifecycleEvents, "handle">;
  lifecycleDlq: MessageQueue;
  logger: Logger;
  metrics: Metrics;
}

/** Of an event admission never took, the lifecycle DLQ keeps at most this many bytes (base64 grows it by a third). */
const DEAD_LETTER_KEPT_BYTES = 256 * 1024;

/** Broker lifecycle events -> admission, while this deployment leads (a tick's second half, ticks.ts). */
export class LifecycleBridge {
  /** The switch was on at the last check (logged once per change, not at every recheck). */
  private pausedByOperator = false;

  constructor(private readonly deps: LifecycleBridgeDeps) {}

  /** Takes the waiting events until monotonic `until` (a stream's pending ones; core NATS: what arrives meanwhile). */
  async run(until: number): Promise<BridgeResult> {
    const { logger } = this.deps;
    let handled = 0;
    let deadLettered = 0;
    const { mode, led } = await this.deps.source.run({
      until,
      leadsNow: () => this.leadsNow(),
      forward: async (events) => {
        const outcomes = await this.admit(events);
        handled += outcomes.filter((outcome) => outcome === "handled").length;
        deadLettered += outcomes.filter((outcome) => outcome === "dead-lettered").length;
        return outcomes;
      },
    });
    if (handled + deadLettered > 0 || !led) logger.info("lifecycle events taken", { mode, handled, deadLettered, paused: !led });
    return { mode, handled, deadLettered, paused: !led };
  }

  /**
   * Whether this deployment leads right now, by its gate (the operator's pause switch included: a
   * paused deployment may still hold an unexpired lease, but its provision and lifecycle functions
   * drop what they are given). A paused or standby deployment neither pulls nor subscribes, so
   * every event waits in the stream (or reaches the leader's subscription) instead of going to a
   * deployment that would drop it; so does one whose lease store cannot be read.
   */
  private async leadsNow(): Promise<boolean> {
    const standing = await this.deps.gate.standing();
    if (standing.kind === "leading") {
      this.pausedByOperator = false;
      return true;
    }
    if (standing.kind === "standby" && standing.pausedByOperator) {
      if (!this.pausedByOperator) this.deps.logger.warn("paused by the operator: not taking lifecycle events");
      this.pausedByOperator = true;
    } else if (standing.kind === "unknown") {
      this.deps.logger.warn("paused: the lease store could not be read, not taking lifecycle events", { error: messageOf(standing.error) });
    }
    return false;
  }

  /**
   * Hands events to admission as queued startup events are. One that admission could not take goes
   * back to the stream, or, on its last delivery (core NATS has no other), to the lifecycle DLQ with
   * the reason, its bytes base64-encoded (they may hold exactly what made it unreadable).
   */
  private async admit(events: BrokerEvent[]): Promise<ForwardOutcome[]> {
    const texts = events.map((event) => utf8(event.data));
    const messages = events.flatMap((event, index) => {
      const body = texts[index];
      return body === undefined ? [] : [{ id: String(index), body, receiveCount: 1, receiptHandle: "", source: event.subject }];
    });
    const failed = new Set((await this.deps.events.handle(messages)).failedMessageIds);
    return Promise.all(
      events.map(async (event, index): Promise<ForwardOutcome> => {
        // Bytes that are not text would reach the DLQ as replacement characters: they go whole.
        if (texts[index] === undefined) return this.deadLetter(event, "not a lifecycle event: not UTF-8 text");
        if (!failed.has(String(index))) return "handled";
        return event.lastChance ? this.deadLetter(event, "admission did not take the lifecycle event on its last delivery") : "retry";
      }),
    );
  }

  private async deadLetter(event: BrokerEvent, reason: string): Promise<ForwardOutcome> {
    const { logger, metrics } = this.deps;
    const kept = event.data.subarray(0, DEAD_LETTER_KEPT_BYTES);
    try {
      await this.deps.lifecycleDlq.send({
        body: Buffer.from(kept).toString("base64"),
        attributes: {
          reason,
          encoding: "base64",
          originalBytes: String(event.data.length),
          truncated: String(kept.length < event.data.length),
          subject: event.subject,
          source: "lifecycle-bridge",
        },
      });
    } catch (error) {
      logger.error("could not dead-letter a lifecycle event admission did not take", { subject: event.subject, reason, error });
      return "retry";
    }
    metrics.count(EXTRA_METRIC.lifecycleEventsDeadLettered);
    logger.warn("sent a lifecycle event to the lifecycle dead-letter queue", { subject: event.subject, reason });
    return "dead-lettered";
  }
}

/** The bytes as UTF-8 text; undefined when they are not. */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
