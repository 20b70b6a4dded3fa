/**
 * The use cases behind the Lambda handlers, written against ports: the lease gate, the admission
 * registry, the provisioning engine, message queues and the broker. `createApp` (create-app.ts)
 * wires the AWS and NATS adapters in; nothing here imports an AWS client.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { BatchProcessor, EventType, processPartialResponse } from "@aws-lambda-powertools/batch";
import type { SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { AckPolicy, DeliverPolicy, type Consumer, type JsMsg, type NatsConnection, type Subscription } from "nats";
import { failuresInARow, type AdmissionRegistry, type HostClaim, type RegistrySummary } from "../admission/registry";
import type { DiscoveryResult } from "../choria/discovery";
import { identityProblem } from "../choria/identity";
import { lifecycleSubject, parseLifecycleEvent, type LifecycleEvent } from "../choria/lifecycle";
import type { ProvisionerConfig } from "../config";
import { isSuccessfulOutcome, keepsHostKnown, type ProvisionEngine, type ProvisionOutcome } from "../engine";
import { AttemptExceedsLeaseError, LeaseStoreError, messageOf, ProvisionerError } from "../errors";
import type { LeaseGate, Standing } from "../lease/gate";
import { describeLease, type LeaseDescription, type LeaseStore } from "../lease/lease";
import { runLeaseKeeper } from "../lease/keeper";
import { EXTRA_METRIC, METRIC, type Clock, type HostWork, type LogAttributes, type Logger, type Metrics } from "../ports";
import { Limiter, mapLimited } from "./concurrency";
import { decodeHostWork, encodeHostWork, retryDelaySeconds } from "./host-work";
import type { MessageQueue, QueueCounts } from "./ports";

/** What a handler knows about its invocation. */
export interface InvocationContext {
  remainingMs(): number;
  requestId?: string;
}

export interface DiscoverResult {
  paused: boolean;
  term?: number;
  discovered: number;
  admitted: number;
}

export interface KeepLeaseResult {
  rounds: number;
  heldRounds: number;
  wonTerms: number[];
}

export interface BridgeResult {
  mode: "jetstream" | "core";
  forwarded: number;
  /** Events SQS can never take (invalid characters, too large), sent to the lifecycle DLQ with the reason. */
  deadLettered: number;
  /** The run ended without this deployment leading at any check: it read and forwarded nothing. */
  paused: boolean;
}

export interface ReprovisionResult {
  admitted: string[];
  rejected: Array<{ identity: string; reason: string }>;
}

export interface StatusReport {
  site: string;
  deploymentId: string;
  leaderElection: boolean;
  lease: LeaseDescription;
  queues: Record<"hostWork" | "hostWorkDlq" | "lifecycle" | "lifecycleDlq", QueueCounts | { error: string }>;
  registry: RegistrySummary;
}

export interface App {
  readonly config: ProvisionerConfig;
  discover(ctx: InvocationContext): Promise<DiscoverResult>;
  keepLease(ctx: InvocationContext): Promise<KeepLeaseResult>;
  bridgeLifecycle(ctx: InvocationContext): Promise<BridgeResult>;
  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  handleHostWorkBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  status(): Promise<StatusReport>;
  reprovision(identities: string[]): Promise<ReprovisionResult>;
  release(): Promise<{ released: boolean }>;
  close(): Promise<void>;
}

/** The broker as the use cases need it: a healthy connection, and the Choria client on top of it. */
export interface BrokerAccess {
  connection(): Promise<NatsConnection>;
  /** Broadcast discovery on the current connection, bounded by `discovery_max_nodes`. */
  discover(): Promise<DiscoveryResult>;
  /** Makes the engine's RPC client use the current connection; call before provisioning. */
  prepareRpc(): Promise<void>;
  /**
   * Closes the connection when a request may still sit in its buffers unconfirmed by the broker,
   * so nothing is sent across a Lambda freeze; the next use reconnects. Returns whether it closed.
   */
  closeIfPublishPending(): Promise<boolean>;
  publishStartup(): Promise<void>;
  close(): Promise<void>;
}

export interface AppQueues {
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
}

export interface AppDeps {
  config: ProvisionerConfig;
  gate: LeaseGate;
  /** Absent when leader election is off. */
  leaseStore?: LeaseStore;
  registry: AdmissionRegistry;
  engine: ProvisionEngine;
  queues: AppQueues;
  broker: BrokerAccess;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  retry: { baseDelaySeconds: number; maxDelaySeconds: number };
  /** Hard failures in a row at one step after which a host is parked in the host-work DLQ. */
  failureLimit: number;
  /** Ms kept back from the Lambda deadline. */
  deadlineMarginMs: number;
  lifecycle: { stream: string; consumer: string };
  /** Request correlation carried into every log line of an invocation. */
  invocations: AsyncLocalStorage<LogAttributes>;
  /** Runs on close (clients to destroy). */
  onClose?: () => Promise<void>;
}

/** A message that goes back to the queue for a later delivery (reported as a batch item failure). */
export class RetryLaterError extends ProvisionerError {}

/** A lease-keeper invocation loops at most this long (bench/failover.ts runs it the same way). */
export const KEEPER_MAX_RUN_MS = 58_000;
const BRIDGE_STOP_BEFORE_DEADLINE_MS = 2_000;
const ADMIT_CONCURRENCY = 16;
/** Discovered hosts are admitted and queued in chunks of one SendMessageBatch. */
const DISCOVERY_CHUNK = 10;
const DISCOVERY_CHUNKS_IN_FLIGHT = 2;
/** Time one chunk (ten conditional writes and one SendMessageBatch) may need before the deadline. */
const DISCOVERY_CHUNK_BUDGET_MS = 2_000;
const JETSTREAM_FETCH_MAX = 100;
const JETSTREAM_FETCH_EXPIRES_MS = 5_000;
const CORE_FLUSH_EVERY_MS = 250;
/** How often a bridge re-reads the lease: while paused, and between subscription checks on core NATS. */
const BRIDGE_PAUSED_RECHECK_MS = 2_000;
/** Of an event SQS refused, the lifecycle DLQ keeps at most this many bytes (base64 grows it by a third). */
const DEAD_LETTER_KEPT_BYTES = 256 * 1024;
/** Deliveries of one event SQS keeps refusing (per-entry failures, each after the queue's own retries) before it is dead-lettered. */
const BRIDGE_MAX_DELIVERIES = 5;

export class ProvisionerApp implements App {
  readonly config: ProvisionerConfig;
  private readonly log: Logger;
  private readonly metrics: Metrics;
  private readonly clock: Clock;
  /** discover() calls in progress: a term won inside one does not start a second discovery. */
  private discovering = 0;
  private announcedUnelected = false;
  private activeInvocations = 0;

  constructor(private readonly deps: AppDeps) {
    this.config = deps.config;
    this.log = deps.logger;
    this.metrics = deps.metrics;
    this.clock = deps.clock;
  }

  /**
   * The lease gate's onWon, once per term for the whole deployment (the marker in the lease item,
   * not once per container): announce the new leader and look for nodes at once (docs/behaviour.md §5, §8).
   */
  async onWonTerm(term: number): Promise<void> {
    this.log.info("announcing the new lease term: publishing the startup event and discovering", { term });
    await this.publishStartup();
    if (this.discovering === 0) await this.runDiscovery(term);
  }

  discover(ctx: InvocationContext): Promise<DiscoverResult> {
    return this.invocation(ctx, async () => {
      this.discovering++;
      try {
        await this.announceUnelected();
        let outcome;
        try {
          outcome = await this.deps.gate.acquireOrRenew();
        } catch (error) {
          this.log.warn("paused: the lease store could not be reached, not discovering", { error: messageOf(error) });
          return { paused: true, discovered: 0, admitted: 0 };
        }
        if (!outcome.holding) {
          this.log.info("paused: another deployment holds the lease, not discovering", {
            holder: outcome.current?.holder,
            currentTerm: outcome.current?.term,
          });
          return { paused: true, discovered: 0, admitted: 0 };
        }
        return { paused: false, ...(await this.runDiscovery(outcome.term, () => ctx.remainingMs() - this.deps.deadlineMarginMs)) };
      } finally {
        this.discovering--;
      }
    });
  }

  keepLease(ctx: InvocationContext): Promise<KeepLeaseResult> {
    return this.invocation(ctx, async () => {
      await this.announceUnelected();
      if (!this.config.leaderElection) {
        await this.deps.gate.acquireOrRenew();
        return { rounds: 1, heldRounds: 1, wonTerms: [] };
      }
      const runFor = Math.min(KEEPER_MAX_RUN_MS, ctx.remainingMs() - BRIDGE_STOP_BEFORE_DEADLINE_MS);
      const summary = await runLeaseKeeper({
        lease: this.deps.gate,
        clock: this.clock,
        until: this.clock.monotonic() + runFor,
        intervalMs: this.config.lease.renewIntervalMs,
        logger: this.log,
      });
      this.log.info("lease keeper run finished", { ...summary, wonTerms: summary.wonTerms.join(",") });
      return { rounds: summary.rounds, heldRounds: summary.heldRounds, wonTerms: summary.wonTerms };
    });
  }

  bridgeLifecycle(ctx: InvocationContext): Promise<BridgeResult> {
    return this.invocation(ctx, async () => {
      const nc = await this.deps.broker.connection();
      const subject = lifecycleSubject("startup", this.config.lifecycleComponent);
      const until = this.clock.monotonic() + ctx.remainingMs() - BRIDGE_STOP_BEFORE_DEADLINE_MS;
      const stream = await this.findLifecycleStream(nc, subject);
      if (stream) return { mode: "jetstream" as const, ...(await this.bridgeJetStream(nc, stream, subject, until)) };
      this.log.info("no JetStream stream holds lifecycle events, listening on core NATS", { subject });
      return { mode: "core" as const, ...(await this.bridgeCore(nc, subject, until)) };
    });
  }

  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse> {
    return this.invocation(ctx, async () => {
      let standing: Promise<Standing> | undefined;
      const currentTerm = () => (standing ??= this.deps.gate.standing());
      // A whole SQS batch at once would flood the registry table; admissions share discovery's bound.
      const limiter = new Limiter(ADMIT_CONCURRENCY);
      return this.processBatch(event, (record) => limiter.run(() => this.handleLifecycleRecord(record, currentTerm)));
    });
  }

  handleHostWorkBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse> {
    return this.invocation(ctx, async () => {
      const standing = await this.deps.gate.standing();
      const limiter = new Limiter(Math.max(1, this.config.workers));
      const remainingMs = () => ctx.remainingMs() - this.deps.deadlineMarginMs;
      return this.processBatch(event, (record) => limiter.run(() => this.handleHostWorkRecord(record, standing, remainingMs)));
    });
  }

  async status(): Promise<StatusReport> {
    const { config, leaseStore, queues } = this.deps;
    const lease = describeLease(leaseStore ? await leaseStore.read(config.site) : undefined, config.deploymentId, this.clock.now());
    this.metrics.gauge(METRIC.paused, !config.leaderElection || lease.heldByThisDeployment ? 0 : 1);
    const counts = async (queue: MessageQueue) => queue.counts().catch((error: unknown) => ({ error: messageOf(error) }));
    const [hostWork, hostWorkDlq, lifecycle, lifecycleDlq, registry] = await Promise.all([
      counts(queues.hostWork),
      counts(queues.hostWorkDlq),
      counts(queues.lifecycle),
      counts(queues.lifecycleDlq),
      this.deps.registry.summary(),
    ]);
    return {
      site: config.site,
      deploymentId: config.deploymentId,
      leaderElection: config.leaderElection,
      lease,
      queues: { hostWork, hostWorkDlq, lifecycle, lifecycleDlq },
      registry,
    };
  }

  async reprovision(identities: string[]): Promise<ReprovisionResult> {
    const result: ReprovisionResult = { admitted: [], rejected: [] };
    const unique = [...new Set(identities)];
    const term = await this.deps.gate.currentTerm();
    if (term === undefined) {
      for (const identity of unique) result.rejected.push({ identity, reason: "paused: this deployment does not hold the lease" });
      return result;
    }
    const admitted: HostWork[] = [];
    for (const identity of unique) {
      const problem = typeof identity === "string" ? identityProblem(identity) : "is not a string";
      if (problem) {
        result.rejected.push({ identity: String(identity), reason: `identity ${problem}` });
        continue;
      }
      // The operator overrides the once-per-interval rule, never a provisioning in progress.
      if (!(await this.deps.registry.forgetUnlessClaimed(identity))) {
        result.rejected.push({ identity, reason: "the host is being provisioned right now" });
        continue;
      }
      const work = await this.deps.registry.admit(identity, "operator", term);
      if (work) admitted.push(work);
      else result.rejected.push({ identity, reason: "the host was admitted again concurrently" });
    }
    const notQueued = new Set((await this.enqueue(admitted)).map((work) => work.identity));
    for (const work of admitted) {
      if (notQueued.has(work.identity)) result.rejected.push({ identity: work.identity, reason: "the work could not be queued" });
      else result.admitted.push(work.identity);
    }
    this.log.info("operator reprovision", { term, admitted: result.admitted.length, rejected: result.rejected.length });
    return result;
  }

  async release(): Promise<{ released: boolean }> {
    const { config, leaseStore, gate } = this.deps;
    if (!config.leaderElection || !leaseStore) return { released: false };
    // The gate releases the term it holds or, in a container that never held it, the stored one.
    const released = await gate.release();
    this.log.info("released the lease on operator request", { released });
    return { released };
  }

  async close(): Promise<void> {
    await this.deps.broker.close();
    await this.deps.onClose?.();
  }

  // --- discovery and admission -----------------------------------------------------------------

  /**
   * Admits and queues discovered hosts chunk by chunk, so provisioning starts while discovery is
   * still admitting. Near the deadline it stops admitting: a host never admitted is found again by
   * the next discovery, whereas one admitted but never queued would wait out a whole interval.
   */
  private async runDiscovery(term: number, remainingMs?: () => number): Promise<Omit<DiscoverResult, "paused">> {
    this.metrics.count(METRIC.discoverCycles);
    let identities: string[];
    try {
      const result = await this.deps.broker.discover();
      identities = result.identities;
      if (result.capped) {
        // Either a fleet larger than the cap is booting, or someone is forging replies: both need a look.
        this.metrics.count(EXTRA_METRIC.discoveryCapped);
        this.log.warn("discovery stopped at discovery_max_nodes; the next discovery finds the rest", {
          term,
          maxNodes: this.config.discoveryMaxNodes,
          replies: result.replies,
          skipped: result.skipped,
        });
      }
    } catch (error) {
      this.metrics.count(METRIC.discoveryErrors);
      this.log.error("discovery failed", { term, error: messageOf(error) });
      return { term, discovered: 0, admitted: 0 };
    }
    this.log.info(`discovered ${identities.length} nodes in provisioning mode`, { term });
    let queued = 0;
    let leftForNextCycle = 0;
    await mapLimited(chunked(identities, DISCOVERY_CHUNK), DISCOVERY_CHUNKS_IN_FLIGHT, async (chunk) => {
      if (remainingMs && remainingMs() < DISCOVERY_CHUNK_BUDGET_MS) {
        leftForNextCycle += chunk.length;
        return;
      }
      const works = await Promise.all(chunk.map((identity) => this.admit(identity, "discovery", term)));
      const admitted = works.filter((work): work is HostWork => work !== undefined);
      // As in Go, the counter counts hosts admitted, not every reply.
      this.metrics.count(METRIC.discovered, admitted.length);
      const failed = await this.enqueue(admitted);
      queued += admitted.length - failed.length;
    });
    if (leftForNextCycle > 0) {
      this.log.warn("stopped admitting before the invocation deadline; the next discovery finds the rest", { term, leftForNextCycle });
    }
    await this.gaugeQueue();
    return { term, discovered: identities.length, admitted: queued };
  }

  private async admit(identity: string, source: HostWork["source"], term: number): Promise<HostWork | undefined> {
    try {
      return await this.deps.registry.admit(identity, source, term);
    } catch (error) {
      this.log.error("could not admit host", { identity, term, error: messageOf(error) });
      return undefined;
    }
  }

  /**
   * Queues term-stamped work; returns what could not be queued. Its admission is undone so the
   * next discovery or event admits the host again: nothing is lost, only delayed.
   */
  private async enqueue(works: HostWork[]): Promise<HostWork[]> {
    if (works.length === 0) return [];
    const accepted = await this.deps.queues.hostWork.sendAll(works.map((work) => ({ body: encodeHostWork(work) })));
    const failed = works.filter((_, index) => !accepted[index]);
    for (const work of failed) {
      this.log.error("could not queue host work; forgetting the host so it is admitted again", { identity: work.identity, term: work.term });
      try {
        await this.deps.registry.withdraw(work);
      } catch (error) {
        this.log.error("could not forget unqueued host; it is admitted again after the interval", {
          identity: work.identity,
          error: messageOf(error),
        });
      }
    }
    return failed;
  }

  private async gaugeQueue(): Promise<void> {
    try {
      const counts = await this.deps.queues.hostWork.counts();
      this.metrics.gauge(METRIC.workQueueEntries, counts.visible + counts.delayed);
      this.metrics.gauge(METRIC.waitingNodes, counts.visible + counts.delayed + counts.inFlight);
    } catch (error) {
      this.log.debug("could not read the host-work queue depth", { error: messageOf(error) });
    }
  }

  // --- lifecycle events ------------------------------------------------------------------------

  private async handleLifecycleRecord(record: SQSRecord, currentTerm: () => Promise<Standing>): Promise<void> {
    let event: LifecycleEvent;
    try {
      event = parseLifecycleEvent(new TextEncoder().encode(record.body));
    } catch (error) {
      await this.deadLetter(this.deps.queues.lifecycleDlq, record, messageOf(error));
      return;
    }
    if (event.type !== "startup" || event.component !== this.config.lifecycleComponent) {
      this.log.debug("ignoring lifecycle event", { type: event.type, component: event.component, identity: event.identity });
      return;
    }
    const standing = await currentTerm();
    if (standing.kind === "unknown") {
      // A store blip is not a standby: the event comes back from SQS instead of being dropped.
      throw new RetryLaterError(`the lease store could not be read: ${messageOf(standing.error)}`, { cause: standing.error });
    }
    const term = standing.kind === "leading" ? standing.term : undefined;
    if (term === undefined) {
      this.metrics.count(EXTRA_METRIC.lifecycleEventsDropped);
      this.log.info("paused: dropping lifecycle startup event", { identity: event.identity });
      return;
    }
    this.metrics.count(EXTRA_METRIC.lifecycleEventsReceived);
    const work = await this.deps.registry.admit(event.identity, "event", term);
    if (!work) return;
    this.metrics.count(METRIC.eventDiscovered);
    this.log.info("admitted host from its startup event", { identity: work.identity, term });
    if ((await this.enqueue([work])).length > 0) throw new RetryLaterError(`could not queue work for ${work.identity}`);
  }

  // --- host work -------------------------------------------------------------------------------

  private async handleHostWorkRecord(record: SQSRecord, standing: Standing, remainingMs: () => number): Promise<void> {
    let work: HostWork;
    try {
      work = decodeHostWork(record.body);
    } catch (error) {
      await this.deadLetter(this.deps.queues.hostWorkDlq, record, messageOf(error));
      return;
    }
    const attributes = { identity: work.identity, term: work.term, messageId: record.messageId };
    if (standing.kind === "unknown") {
      // Nothing is known about the lease, so nothing may be dropped: every item goes back with the reason.
      const reason = `the lease store could not be read: ${messageOf(standing.error)}`;
      await this.retryLater(record, { ...attributes, reason });
      throw new RetryLaterError(`${work.identity}: ${reason}`, { cause: standing.error });
    }
    if (standing.kind === "standby") {
      this.metrics.count(EXTRA_METRIC.staleWorkDiscarded);
      this.log.info("paused: dropping host work, the leader rediscovers the host", { ...attributes, holder: standing.current?.holder });
      return;
    }
    const term = standing.term;

    let begun;
    try {
      begun = await this.deps.registry.begin(work, term);
    } catch (error) {
      await this.retryLater(record, attributes);
      throw new RetryLaterError(`could not claim ${work.identity}: ${messageOf(error)}`, { cause: error });
    }
    switch (begun.status) {
      case "claimed":
        break;
      case "already-claimed":
        // Another delivery of this work is running; this one comes back after the delay.
        await this.retryLater(record, attributes);
        throw new RetryLaterError(`${work.identity} is being provisioned by another worker`);
      default:
        // stale-term, not-current, waited-too-long, already-provisioned: the registry logged and counted it.
        return;
    }

    const claim = begun.claim;
    try {
      await this.deps.broker.prepareRpc();
    } catch (error) {
      await this.giveBack(claim, record, `the broker could not be reached: ${messageOf(error)}`);
      throw new RetryLaterError(`broker unavailable for ${work.identity}`, { cause: error });
    }
    const outcome = await this.deps.engine.provision(work, { remainingMs });
    await this.finish(claim, record, outcome);
  }

  private async finish(claim: HostClaim, record: SQSRecord, outcome: ProvisionOutcome): Promise<void> {
    const { identity, term } = claim.work;
    const storeBlip = outcome.kind === "paused" && causedBy(outcome.error, LeaseStoreError);
    if (outcome.kind === "deferred" || (outcome.kind === "failed" && outcome.retryable) || storeBlip) {
      // A lease store that could not be read is not a lost lease: the host comes back, with the reason.
      await this.giveBack(claim, record, outcome.error.message);
      throw new RetryLaterError(`${identity}: ${outcome.error.message}`);
    }
    if (outcome.kind === "failed") {
      // A step no lease validity can ever cover is parked at once: it would only fail the same way again.
      await this.recordFailure(claim, record, outcome.step, outcome.error.message, causedBy(outcome.error, AttemptExceedsLeaseError));
      return;
    }
    if (outcome.kind === "paused") {
      this.log.info("paused mid-provisioning; dropping the work, the leader rediscovers the host", { identity, term, step: outcome.step });
    }
    const keep = isSuccessfulOutcome(outcome) && keepsHostKnown(outcome);
    try {
      await this.deps.registry.complete(claim, keep ? "provisioned" : "failed");
    } catch (error) {
      // The claim runs out on its own; the next discovery after that admits the host again.
      this.log.error("could not record the end of provisioning", { identity, term, error: messageOf(error) });
    }
  }

  /**
   * A hard failure: the host may be admitted again by the next discovery or event, until it has
   * failed at the same step `failureLimit` times in a row. Then its work goes to the DLQ with the
   * last error and the host is parked, so a broken helper or node cannot spin for ever unnoticed.
   */
  private async recordFailure(claim: HostClaim, record: SQSRecord, step: string, error: string, parkNow = false): Promise<void> {
    const { identity, term } = claim.work;
    const failures = failuresInARow(claim, step);
    const reason = `${step}: ${error}`;
    let park = parkNow || failures >= this.deps.failureLimit;
    if (park) {
      try {
        await this.deadLetter(this.deps.queues.hostWorkDlq, record, reason, { identity, step, failures: String(failures), term: String(term) });
        this.metrics.count(EXTRA_METRIC.hostsParked);
        this.log.error(`parked ${identity} after ${failures} failures in a row at step ${step}`, { identity, term, step, failures, reason });
      } catch (dlqError) {
        park = false;
        this.log.error("could not dead-letter the work of a failing host; it is retried instead of parked", {
          identity,
          term,
          error: messageOf(dlqError),
        });
      }
    }
    try {
      if (!(await this.deps.registry.recordFailure(claim, { step, reason, failures, park }))) {
        this.log.warn("the claim ran out before the failure could be recorded", { identity, term, step });
      }
    } catch (storeError) {
      // The claim runs out on its own; the next discovery after that admits the host again.
      this.log.error("could not record the failure", { identity, term, step, error: messageOf(storeError) });
    }
  }

  /** Gives the claim back with the reason (shown by status) and delays the message's next delivery. */
  private async giveBack(claim: HostClaim, record: SQSRecord, reason: string): Promise<void> {
    const { identity, term } = claim.work;
    try {
      if (!(await this.deps.registry.retryLater(claim, reason))) {
        this.log.warn("the claim ran out before it could be given back", { identity, term });
      }
    } catch (error) {
      this.log.error("could not give the claim back; it runs out on its own", { identity, term, error: messageOf(error) });
    }
    await this.retryLater(record, { identity, term, messageId: record.messageId, reason });
  }

  private async retryLater(record: SQSRecord, attributes: LogAttributes): Promise<void> {
    const receiveCount = Number(record.attributes?.ApproximateReceiveCount ?? 1);
    const seconds = retryDelaySeconds(receiveCount, this.deps.retry.baseDelaySeconds, this.deps.retry.maxDelaySeconds);
    this.log.info(`host work goes back to the queue for ${seconds}s`, { ...attributes, receiveCount });
    try {
      await this.deps.queues.hostWork.delay(record.receiptHandle, seconds);
    } catch (error) {
      this.log.warn("could not delay the message; it returns after the queue's visibility timeout", {
        ...attributes,
        error: messageOf(error),
      });
    }
  }

  // --- shared ----------------------------------------------------------------------------------

  private async processBatch(event: SQSEvent, handle: (record: SQSRecord) => Promise<void>): Promise<SQSBatchResponse> {
    const processor = new BatchProcessor(EventType.SQS);
    return processPartialResponse(event, handle, processor, { throwOnFullBatchFailure: false });
  }

  /** Poison (and parked hosts' work) goes to the DLQ with its reason and is acknowledged, so it never spins on the queue. */
  private async deadLetter(dlq: MessageQueue, record: SQSRecord, reason: string, extra: Record<string, string> = {}): Promise<void> {
    this.log.warn("sending a message to the dead-letter queue", { messageId: record.messageId, reason });
    await dlq.send({
      body: record.body,
      attributes: { reason, ...extra, sourceMessageId: record.messageId, sourceQueue: record.eventSourceARN || "unknown" },
    });
  }

  private async publishStartup(): Promise<void> {
    try {
      await this.deps.broker.publishStartup();
      this.log.info("published the provisioner startup event", { identity: this.config.identity });
    } catch (error) {
      this.log.error("could not publish the provisioner startup event", { error: messageOf(error) });
    }
  }

  /** Without leader election there is no term to win: announce once per container instead. */
  private async announceUnelected(): Promise<void> {
    if (this.config.leaderElection || this.announcedUnelected) return;
    this.announcedUnelected = true;
    await this.publishStartup();
  }

  /**
   * Every handler call runs here: the gate's first read is a store round (nothing a warm container
   * confirmed earlier is trusted), and a request still buffered unconfirmed at the end closes the
   * connection, so it cannot leave at some later thaw.
   */
  private invocation<T>(ctx: InvocationContext, run: () => Promise<T>): Promise<T> {
    const attributes: LogAttributes = ctx.requestId ? { requestId: ctx.requestId } : {};
    return this.deps.invocations.run(attributes, async () => {
      // Lambda runs one invocation per container at a time; the local runtime and tests may overlap
      // them in one process, and what a running invocation confirmed is current for the others.
      if (this.activeInvocations++ === 0) this.deps.gate.beginInvocation();
      try {
        return await run();
      } finally {
        if (--this.activeInvocations === 0 && (await this.deps.broker.closeIfPublishPending().catch(() => false))) {
          this.log.warn("closed the broker connection: a request was still unconfirmed at the end of the invocation");
        }
      }
    });
  }

  // --- lifecycle bridge ------------------------------------------------------------------------

  private async findLifecycleStream(nc: NatsConnection, subject: string): Promise<string | undefined> {
    let jsm;
    try {
      jsm = await nc.jetstreamManager({ timeout: 2_000 });
    } catch (error) {
      this.log.debug("JetStream is not available on the broker", { error: messageOf(error) });
      return undefined;
    }
    try {
      const info = await jsm.streams.info(this.deps.lifecycle.stream);
      return info.config.name;
    } catch {
      // Not under the configured name; any stream capturing the subject will do.
    }
    try {
      return await jsm.streams.find(subject);
    } catch {
      return undefined;
    }
  }

  /**
   * Whether this deployment leads right now, from a consistent read of the lease (the bridge never
   * writes it: taking part in the election is the keeper's job). A paused deployment's bridge
   * neither pulls nor subscribes, so every event waits in the stream (or reaches the leader's
   * subscription) instead of being forwarded to a deployment that would drop it.
   */
  private async leadsNow(): Promise<boolean> {
    const { config, leaseStore } = this.deps;
    if (!config.leaderElection) return true;
    if (!leaseStore) return false;
    try {
      const lease = await leaseStore.read(config.site);
      return lease !== undefined && lease.holder === config.deploymentId && lease.expiresAt - config.lease.skewBoundMs > this.clock.now();
    } catch (error) {
      this.log.warn("paused: the lease store could not be read, not bridging lifecycle events", { error: messageOf(error) });
      return false;
    }
  }

  /** Sleeps until the next leadership check (or the end of the run). */
  private async waitWhilePaused(until: number): Promise<void> {
    await this.clock.sleep(Math.max(0, Math.min(BRIDGE_PAUSED_RECHECK_MS, until - this.clock.monotonic())));
  }

  /**
   * Sends events to the lifecycle queue. An event SQS can never take, or one it still refuses on
   * its last chance (`lastChance`: no redelivery will follow), goes to the lifecycle DLQ with the
   * reason (its bytes base64-encoded: they may hold exactly the characters SQS refuses), so it
   * neither spins forever nor blocks the good events batched with it.
   */
  private async forwardEvents(
    events: Array<{ data: Uint8Array; subject: string; lastChance: boolean }>,
  ): Promise<Array<"sent" | "dead-lettered" | "retry">> {
    const decoder = new TextDecoder();
    const outcomes = await this.deps.queues.lifecycle.sendEach(events.map((event) => ({ body: decoder.decode(event.data) })));
    return Promise.all(
      outcomes.map(async (outcome, index): Promise<"sent" | "dead-lettered" | "retry"> => {
        if (outcome.accepted) return "sent";
        const event = events[index] as { data: Uint8Array; subject: string; lastChance: boolean };
        if (!outcome.permanent && !event.lastChance) return "retry";
        const kept = event.data.subarray(0, DEAD_LETTER_KEPT_BYTES);
        try {
          await this.deps.queues.lifecycleDlq.send({
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
          this.log.error("could not dead-letter a lifecycle event SQS refused", { reason: outcome.reason, error: messageOf(error) });
          return "retry";
        }
        this.metrics.count(EXTRA_METRIC.lifecycleEventsDeadLettered);
        this.log.warn("SQS refused a lifecycle event; sent it to the lifecycle dead-letter queue", { reason: outcome.reason, subject: event.subject });
        return "dead-lettered";
      }),
    );
  }

  private async bridgeJetStream(
    nc: NatsConnection,
    stream: string,
    subject: string,
    until: number,
  ): Promise<Omit<BridgeResult, "mode">> {
    const durable = this.deps.lifecycle.consumer;
    let consumer: Consumer | undefined;
    let forwarded = 0;
    let deadLettered = 0;
    let led = false;
    for (;;) {
      const expires = Math.floor(Math.min(JETSTREAM_FETCH_EXPIRES_MS, until - this.clock.monotonic()));
      if (expires < 1_000) break;
      // Checked before every fetch: a paused deployment takes nothing from the shared consumer.
      if (!(await this.leadsNow())) {
        await this.waitWhilePaused(until);
        continue;
      }
      led = true;
      consumer ??= await this.lifecycleConsumer(nc, stream, subject);
      const batch: JsMsg[] = [];
      const messages = await consumer.fetch({ max_messages: JETSTREAM_FETCH_MAX, expires });
      for await (const message of messages) batch.push(message);
      if (batch.length === 0) continue;
      // Lost the lease while the fetch waited: hand the events straight back for the new leader.
      if (!(await this.leadsNow())) {
        for (const message of batch) message.nak();
        continue;
      }
      const outcomes = await this.forwardEvents(
        batch.map((message) => ({ data: message.data, subject: message.subject, lastChance: message.info.deliveryCount >= BRIDGE_MAX_DELIVERIES })),
      );
      batch.forEach((message, index) => (outcomes[index] === "retry" ? message.nak(5_000) : message.ack()));
      forwarded += outcomes.filter((outcome) => outcome === "sent").length;
      deadLettered += outcomes.filter((outcome) => outcome === "dead-lettered").length;
      const retried = outcomes.filter((outcome) => outcome === "retry").length;
      if (retried > 0) this.log.warn("SQS did not accept lifecycle events; JetStream redelivers them", { retried });
    }
    await nc.flush();
    this.log.info("lifecycle bridge run finished", { mode: "jetstream", stream, durable, forwarded, deadLettered, paused: !led });
    return { forwarded, deadLettered, paused: !led };
  }

  /** The durable consumer all deployments of the site share (created on first use by a leader). */
  private async lifecycleConsumer(nc: NatsConnection, stream: string, subject: string): Promise<Consumer> {
    const jsm = await nc.jetstreamManager();
    const durable = this.deps.lifecycle.consumer;
    try {
      await jsm.consumers.info(stream, durable);
    } catch {
      // Events older than 2 x interval would be skipped anyway; do not replay the stream's history.
      const startTime = new Date(this.clock.now() - 2 * this.config.intervalMs).toISOString();
      await jsm.consumers.add(stream, {
        durable_name: durable,
        filter_subject: subject,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.StartTime,
        opt_start_time: startTime,
        ack_wait: 30_000_000_000,
      });
      this.log.info("created the lifecycle consumer", { stream, durable, subject });
    }
    return nc.jetstream().consumers.get(stream, durable);
  }

  /**
   * Core NATS has no replay: events published while no leader's bridge listens are lost
   * (docs/lifecycle.md). The queue subscription exists only while this deployment leads, so a
   * paused deployment never takes a share of the events.
   */
  private async bridgeCore(nc: NatsConnection, subject: string, until: number): Promise<Omit<BridgeResult, "mode">> {
    const pending: Array<{ data: Uint8Array; subject: string; lastChance: boolean }> = [];
    let forwarded = 0;
    let deadLettered = 0;
    let lost = 0;
    let led = false;
    let chain: Promise<void> = Promise.resolve();
    const flush = (): Promise<void> => {
      const events = pending.splice(0);
      if (events.length > 0) {
        chain = chain.then(async () => {
          const outcomes = await this.forwardEvents(events);
          forwarded += outcomes.filter((outcome) => outcome === "sent").length;
          deadLettered += outcomes.filter((outcome) => outcome === "dead-lettered").length;
          lost += outcomes.filter((outcome) => outcome === "retry").length;
        });
      }
      return chain;
    };
    let subscription: Subscription | undefined;
    const timer = setInterval(() => void flush(), CORE_FLUSH_EVERY_MS);
    try {
      while (until - this.clock.monotonic() > 0) {
        const leads = await this.leadsNow();
        if (leads && !subscription) {
          led = true;
          subscription = nc.subscribe(subject, {
            queue: this.deps.lifecycle.consumer,
            callback: (error, message) => {
              if (error) return;
              // Core NATS never redelivers: an event SQS keeps refusing is dead-lettered, not dropped.
              pending.push({ data: message.data, subject: message.subject, lastChance: true });
              if (pending.length >= 10) void flush();
            },
          });
        } else if (!leads && subscription) {
          await subscription.drain();
          subscription = undefined;
        }
        await this.waitWhilePaused(until);
      }
      await subscription?.drain();
    } finally {
      clearInterval(timer);
      await flush();
    }
    if (lost > 0) this.log.error("neither the lifecycle queue nor its DLQ accepted lifecycle events from core NATS; they are lost", { lost });
    this.log.info("lifecycle bridge run finished", { mode: "core", forwarded, deadLettered, paused: !led });
    return { forwarded, deadLettered, paused: !led };
  }
}

/** Whether `kind` is the error or anywhere in its cause chain. */
function causedBy(error: unknown, kind: abstract new (...args: never[]) => Error): boolean {
  for (let current = error, depth = 0; current !== undefined && depth < 10; current = (current as { cause?: unknown }).cause, depth++) {
    if (current instanceof kind) return true;
  }
  return false;
}

function chunked<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
}
