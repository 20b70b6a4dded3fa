/**
 * Lifecycle events (docs/lifecycle.md): the bridge forwards startup events from the broker to the
 * lifecycle queue while this deployment leads, and each queued startup event of a node in
 * provisioning mode becomes admitted host work through the admission flow (admission-flow.ts).
 */
import { parseLifecycleEvent, type LifecycleEvent } from "../choria/lifecycle";
import { messageOf } from "../errors";
import type { LeaseGate, Standing } from "../ports/lease-gate";
import { leadsAt } from "../lease/stored-lease";
import type { LeaseStore } from "../ports/lease-store";
import type { PauseStore } from "../ports/pause-store";
import { EXTRA_METRIC, METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { AdmissionRegistry } from "../admission/registry";
import type { AdmissionFlow } from "./admission-flow";
import { deadLetter, RetryLaterError, runBatch } from "./batch";
import type { BatchResult, BrokerEvent, ForwardOutcome, InvocationContext, LifecycleEventSource, MessageQueue, QueueMessage } from "./use-case-ports";

/** A whole SQS batch at once would flood the registry table; admissions share discovery's bound. */
const ADMIT_CONCURRENCY = 16;

export interface LifecycleEventsDeps {
  /** The component whose startup events mean "a node in provisioning mode" (`lifecycle_component`). */
  component: string;
  gate: Pick<LeaseGate, "standing">;
  admission: Pick<AdmissionFlow, "admitAndEnqueue">;
  /** The credentials each host was last given: a startup event older than them is stale. */
  registry: Pick<AdmissionRegistry, "credentialsOf">;
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
  forwarded: number;
  /** Events SQS can never take (invalid characters, too large), sent to the lifecycle DLQ with the reason. */
  deadLettered: number;
  /** The run ended without this deployment leading at any check: it read and forwarded nothing. */
  paused: boolean;
}

interface LifecycleBridgeSettings {
  leaderElection: boolean;
  site: string;
  deploymentId: string;
  /** How far another machine's clock may be ahead (`lease.skew_bound`). */
  skewBoundMs: number;
}

export interface LifecycleBridgeDeps {
  settings: LifecycleBridgeSettings;
  /** Absent when leader election is off. */
  leaseStore?: Pick<LeaseStore, "read">;
  /** The operator's pause switch of this deployment: a paused leader does not bridge either. */
  pauseStore?: Pick<PauseStore, "read">;
  source: LifecycleEventSource;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

/** The bridge stops reading this long before the Lambda deadline. */
const BRIDGE_STOP_BEFORE_DEADLINE_MS = 2_000;
/** Of an event SQS refused, the lifecycle DLQ keeps at most this many bytes (base64 grows it by a third). */
const DEAD_LETTER_KEPT_BYTES = 256 * 1024;

/** Broker lifecycle events -> the lifecycle queue, while this deployment leads. */
export class LifecycleBridge {
  /** The switch was on at the last check (logged once per change, not at every recheck). */
  private pausedByOperator = false;

  constructor(private readonly deps: LifecycleBridgeDeps) {}

  async run(ctx: InvocationContext): Promise<BridgeResult> {
    const { clock, logger } = this.deps;
    let forwarded = 0;
    let deadLettered = 0;
    const { mode, led } = await this.deps.source.run({
      until: clock.monotonic() + ctx.remainingMs() - BRIDGE_STOP_BEFORE_DEADLINE_MS,
      leadsNow: () => this.leadsNow(),
      forward: async (events) => {
        const outcomes = await this.forward(events);
        forwarded += outcomes.filter((outcome) => outcome === "sent").length;
        deadLettered += outcomes.filter((outcome) => outcome === "dead-lettered").length;
        return outcomes;
      },
    });
    logger.info("lifecycle bridge run finished", { mode, forwarded, deadLettered, paused: !led });
    return { mode, forwarded, deadLettered, paused: !led };
  }

  /**
   * Whether this deployment leads right now, from a consistent read of the lease (the bridge never
   * writes it: taking part in the election is the keeper's job) and of the operator's pause switch
   * (a paused deployment may still hold an unexpired lease, but its provision and lifecycle
   * functions drop what they are given). A paused or standby deployment's bridge neither pulls nor
   * subscribes, so every event waits in the stream (or reaches the leader's subscription) instead
   * of being forwarded to a deployment that would drop it.
   */
  private async leadsNow(): Promise<boolean> {
    const { settings, leaseStore, pauseStore } = this.deps;
    if (!settings.leaderElection) return true;
    if (!leaseStore) return false;
    try {
      const [lease, pause] = await Promise.all([leaseStore.read(settings.site), pauseStore?.read(settings.site, settings.deploymentId)]);
      if (pause?.paused === true) {
        if (!this.pausedByOperator) this.deps.logger.warn("paused by the operator: not bridging lifecycle events", { deploymentId: settings.deploymentId });
        this.pausedByOperator = true;
        return false;
      }
      this.pausedByOperator = false;
      return leadsAt(lease, settings.deploymentId, this.deps.clock.now(), settings.skewBoundMs);
    } catch (error) {
      this.deps.logger.warn("paused: the lease store could not be read, not bridging lifecycle events", { error: messageOf(error) });
      return false;
    }
  }

  /**
   * Sends events to the lifecycle queue. An event SQS can never take, or one it still refuses on
   * its last chance (no redelivery will follow), goes to the lifecycle DLQ with the reason (its
   * bytes base64-encoded: they may hold exactly the characters SQS refuses), so it neither spins
   * forever nor blocks the good events batched with it.
   */
  private async forward(events: BrokerEvent[]): Promise<ForwardOutcome[]> {
    const { logger, metrics } = this.deps;
    const decoder = new TextDecoder();
    const outcomes = await this.deps.lifecycle.sendEach(events.map((event) => ({ body: decoder.decode(event.data) })));
    return Promise.all(
      outcomes.map(async (outcome, index): Promise<ForwardOutcome> => {
        if (outcome.accepted) return "sent";
        const event = events[index] as BrokerEvent;
        if (!outcome.permanent && !event.lastChance) return "retry";
        const kept = event.data.subarray(0, DEAD_LETTER_KEPT_BYTES);
        try {
          await this.deps.lifecycleDlq.send({
            body: Buffer.from(kept).toString("base64"),
            attributes: {
              reason: `SQS refused the lifecycle event: ${outcome.reason}`,
              encoding: "base64",
              originalBytes: String(event.data.length),
              truncated: String(kept.length < event.data.length),
              subject: event.subject,
              source: "lifecycle-bridge",
            },
          });
        } catch (error) {
          logger.error("could not dead-letter a lifecycle event SQS refused", { reason: outcome.reason, error });
          return "retry";
        }
        metrics.count(EXTRA_METRIC.lifecycleEventsDeadLettered);
        logger.warn("SQS refused a lifecycle event; sent it to the lifecycle dead-letter queue", { reason: outcome.reason, subject: event.subject });
        return "dead-lettered";
      }),
    );
  }
}
