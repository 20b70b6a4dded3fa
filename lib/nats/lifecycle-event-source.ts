/**
 * Where the lifecycle bridge reads startup events (docs/lifecycle.md): a JetStream stream that
 * captures them, through the durable consumer all deployments of the site share, or else a core
 * NATS queue subscription. The use case (lib/app/lifecycle-events.ts) decides whether this
 * deployment leads and what becomes of each event; this adapter reads only while it leads, and
 * acknowledges or hands back each event by the outcome it is given. Each run is one tick's
 * (lib/app/ticks.ts): from a stream it takes what is waiting and returns.
 */
import { AckPolicy, DeliverPolicy, type Consumer, type JsMsg, type NatsConnection } from "nats";
import type { BrokerEvent, LifecycleEventRun, LifecycleEventSource } from "../app/use-case-ports";
import { messageOf } from "../errors";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";

/** The durable consumer the site's deployments share unless LIFECYCLE_CONSUMER names another; JetStream durable names may not contain `.`, `*`, `>` or whitespace. */
export function defaultConsumerName(site: string): string {
  return `provisioner-${(site || "default").replace(/[.*>\s]/g, "_")}`;
}

export interface NatsLifecycleEventSourceSettings {
  /** The stream looked up first; any stream capturing `subject` will do otherwise. */
  stream: string;
  /** The durable consumer's name, and the core NATS queue group. */
  consumer: string;
  /** The startup events' subject (lib/choria/lifecycle.ts `lifecycleSubject`). */
  subject: string;
  /** A new durable consumer starts this far back: older events would be skipped anyway (2 x interval). */
  replayWindowMs: number;
}

export interface NatsLifecycleEventSourceDeps {
  connection(): Promise<NatsConnection>;
  clock: Clock;
  logger: Logger;
}

const JETSTREAM_FETCH_MAX = 100;
const JETSTREAM_FETCH_EXPIRES_MS = 5_000;
/** A fetch shorter than this is not worth starting before the run ends. */
const JETSTREAM_FETCH_MIN_MS = 1_000;
/** JetStream redelivers an event handed back with `retry` after this long. */
const JETSTREAM_RETRY_DELAY_MS = 5_000;
const JETSTREAM_ACK_WAIT_NS = 30_000_000_000;
const CORE_FLUSH_EVERY_MS = 250;
const CORE_FLUSH_AT_EVENTS = 10;
/** How often a core NATS subscription re-reads leadership. */
const LEADERSHIP_RECHECK_MS = 2_000;
/** Deliveries of one event admission keeps failing before it is dead-lettered. */
const MAX_DELIVERIES = 5;

export class NatsLifecycleEventSource implements LifecycleEventSource {
  constructor(
    private readonly settings: NatsLifecycleEventSourceSettings,
    private readonly deps: NatsLifecycleEventSourceDeps,
  ) {}

  async run(run: LifecycleEventRun): Promise<{ mode: "jetstream" | "core"; led: boolean }> {
    const nc = await this.deps.connection();
    const stream = await this.findStream(nc);
    if (stream) return { mode: "jetstream", led: await this.fromJetStream(nc, stream, run) };
    this.deps.logger.info("no JetStream stream holds lifecycle events, listening on core NATS", { subject: this.settings.subject });
    return { mode: "core", led: await this.fromCore(nc, run) };
  }

  private async findStream(nc: NatsConnection): Promise<string | undefined> {
    let jsm;
    try {
      jsm = await nc.jetstreamManager({ timeout: 2_000 });
    } catch (error) {
      this.deps.logger.debug("JetStream is not available on the broker", { error: messageOf(error) });
      return undefined;
    }
    try {
      const info = await jsm.streams.info(this.settings.stream);
      return info.config.name;
    } catch {
      // Not under the configured name; any stream capturing the subject will do.
    }
    try {
      return await jsm.streams.find(this.settings.subject);
    } catch {
      return undefined;
    }
  }

  /**
   * Takes what waits for the site's durable consumer while this deployment leads, and returns
   * once nothing is waiting: a tick pays for the events, not for waiting on new ones. Returns
   * whether it led.
   */
  private async fromJetStream(nc: NatsConnection, stream: string, run: LifecycleEventRun): Promise<boolean> {
    const { clock, logger } = this.deps;
    if (!(await run.leadsNow())) return false;
    const consumer = await this.durableConsumer(nc, stream);
    let lookedForRedeliveries = false;
    for (;;) {
      const left = Math.floor(Math.min(JETSTREAM_FETCH_EXPIRES_MS, run.until - clock.monotonic()));
      if (left <= 0) break;
      const { num_pending: undelivered, num_ack_pending: unacknowledged } = await consumer.info();
      // Events handed back (or left by a crashed leader) come again once their delay passes; one
      // short fetch per run looks for them, since the consumer does not count them apart.
      if (undelivered === 0 && (unacknowledged === 0 || lookedForRedeliveries || left < JETSTREAM_FETCH_MIN_MS)) break;
      if (undelivered === 0) lookedForRedeliveries = true;
      const batch: JsMsg[] = [];
      const maxMessages = Math.max(1, Math.min(JETSTREAM_FETCH_MAX, undelivered));
      // Waiting events come at once, so a run with less than the fetch's minimum left still takes
      // them (a renew_interval of 2 s leaves a tick 1 s): only the wait for redeliveries needs the time.
      const expires = undelivered === 0 ? JETSTREAM_FETCH_MIN_MS : Math.max(JETSTREAM_FETCH_MIN_MS, left);
      const messages = await consumer.fetch({ max_messages: maxMessages, expires });
      for await (const message of messages) batch.push(message);
      if (batch.length === 0) continue;
      // Lost the lease while fetching: hand the events straight back for the new leader.
      if (!(await run.leadsNow())) {
        for (const message of batch) message.nak();
        break;
      }
      const outcomes = await run.forward(
        batch.map((message) => ({ data: message.data, subject: message.subject, lastChance: message.info.deliveryCount >= MAX_DELIVERIES })),
      );
      batch.forEach((message, index) => (outcomes[index] === "retry" ? message.nak(JETSTREAM_RETRY_DELAY_MS) : message.ack()));
      const retried = outcomes.filter((outcome) => outcome === "retry").length;
      if (retried > 0) logger.warn("lifecycle events not admitted yet; JetStream redelivers them", { retried });
    }
    await nc.flush();
    return true;
  }

  /** The durable consumer all deployments of the site share (created on first use by a leader). */
  private async durableConsumer(nc: NatsConnection, stream: string): Promise<Consumer> {
    const { consumer: durable, subject } = this.settings;
    const jsm = await nc.jetstreamManager();
    try {
      await jsm.consumers.info(stream, durable);
    } catch {
      // Do not replay the stream's history: events older than the replay window would be skipped anyway.
      const startTime = new Date(this.deps.clock.now() - this.settings.replayWindowMs).toISOString();
      await jsm.consumers.add(stream, {
        durable_name: durable,
        filter_subject: subject,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.StartTime,
        opt_start_time: startTime,
        ack_wait: JETSTREAM_ACK_WAIT_NS,
      });
      this.deps.logger.info("created the lifecycle consumer", { stream, durable, subject });
    }
    return nc.jetstream().consumers.get(stream, durable);
  }

  /**
   * Core NATS has no replay: events published while no leader listens are lost
   * (docs/lifecycle.md). The queue subscription exists only while this deployment leads, so a
   * paused deployment never takes a share of the events. Returns whether it led.
   */
  private async fromCore(nc: NatsConnection, run: LifecycleEventRun): Promise<boolean> {
    const { clock, logger } = this.deps;
    if (!(await run.leadsNow())) return false;
    const pending: BrokerEvent[] = [];
    let lost = 0;
    let chain: Promise<void> = Promise.resolve();
    const flush = (): Promise<void> => {
      const events = pending.splice(0);
      if (events.length > 0) {
        chain = chain.then(async () => {
          lost += (await run.forward(events)).filter((outcome) => outcome === "retry").length;
        });
      }
      return chain;
    };
    const subscription = nc.subscribe(this.settings.subject, {
      queue: this.settings.consumer,
      callback: (error, message) => {
        if (error) return;
        // Core NATS never redelivers: an event admission cannot take is dead-lettered, not dropped.
        pending.push({ data: message.data, subject: message.subject, lastChance: true });
        if (pending.length >= CORE_FLUSH_AT_EVENTS) void flush();
      },
    });
    const timer = setInterval(() => void flush(), CORE_FLUSH_EVERY_MS);
    try {
      for (let left = run.until - clock.monotonic(); left > 0; left = run.until - clock.monotonic()) {
        await clock.sleep(Math.min(LEADERSHIP_RECHECK_MS, left));
        if (!(await run.leadsNow())) break;
      }
      await subscription.drain();
    } finally {
      clearInterval(timer);
      await flush();
    }
    if (lost > 0) logger.error("lifecycle events from core NATS could be neither admitted nor dead-lettered; they are lost", { lost });
    return true;
  }
}
