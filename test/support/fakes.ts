/**
 * The test doubles every suite shares: what a test observes (a recording logger and metrics), the
 * clocks it controls, and scripted or adapted ports. One copy each; a suite that needs a variant
 * composes these rather than writing its own.
 */
import type {
  BatchResult,
  Broker,
  BrokerEvent,
  ForwardOutcome,
  LifecycleEventRun,
  LifecycleEventSource,
  MessageQueue,
  OutgoingMessage,
  QueueCounts,
  QueueMessage,
  SendOutcome,
} from "../../lib/app/ports";
import type { DiscoveryResult } from "../../lib/choria/discovery";
import type { ProvisionOutcome } from "../../lib/engine";
import type { AnyMetricName, Clock, HostWork, LogAttributes, Logger, MetricLabels, Metrics } from "../../lib/ports";

// ---------------------------------------------------------------------------------------------
// Observation, clocks and RPC (shared test support)
// ---------------------------------------------------------------------------------------------

export interface LogRecord {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  attributes?: LogAttributes;
}

/** Keeps every line logged, in order. */
export class RecordingLogger implements Logger {
  readonly records: LogRecord[] = [];
  debug(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "debug", message, attributes });
  }
  info(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "info", message, attributes });
  }
  warn(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "warn", message, attributes });
  }
  error(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "error", message, attributes });
  }
  /** The lines logged at `level`. */
  at(level: LogRecord["level"]): LogRecord[] {
    return this.records.filter((record) => record.level === level);
  }
  /** Everything logged as one string, for checks that a secret appears nowhere. */
  text(): string {
    return JSON.stringify(this.records);
  }
}

export interface MetricRecord {
  type: "gauge" | "count" | "timing";
  name: AnyMetricName;
  value: number;
  labels?: MetricLabels;
}

/** Keeps every observation, in order. */
export class RecordingMetrics implements Metrics {
  readonly records: MetricRecord[] = [];
  gauge(name: AnyMetricName, value: number, labels?: MetricLabels): void {
    this.records.push({ type: "gauge", name, value, labels });
  }
  count(name: AnyMetricName, increment = 1, labels?: MetricLabels): void {
    this.records.push({ type: "count", name, value: increment, labels });
  }
  timing(name: AnyMetricName, seconds: number, labels?: MetricLabels): void {
    this.records.push({ type: "timing", name, value: seconds, labels });
  }
  of(name: AnyMetricName): MetricRecord[] {
    return this.records.filter((record) => record.name === name);
  }
  /** The values observed for `name`, in order. */
  values(name: AnyMetricName): number[] {
    return this.of(name).map((record) => record.value);
  }
  lastGauge(name: AnyMetricName): number | undefined {
    return this.of(name).filter((record) => record.type === "gauge").at(-1)?.value;
  }
  /** The sum of the counts of `name` (only those labelled with `rpc` when it is given). */
  total(name: AnyMetricName, rpc?: string): number {
    return this.of(name)
      .filter((record) => record.type === "count" && (rpc === undefined || record.labels?.rpc === rpc))
      .reduce((sum, record) => sum + record.value, 0);
  }
}

/**
 * Virtual time that moves only when the test advances it or the code under test sleeps: a sleep
 * returns at once and moves time on by its length (every sleep is recorded).
 */
export class VirtualClock implements Clock {
  readonly sleeps: number[] = [];
  /** True time minus monotonic time: fixed, as both move together. */
  private readonly monotonicOffset: number;

  /** `trueTime`: the wall clock at the start; `monotonicStart`: the monotonic clock then. */
  constructor(
    public trueTime = 1_700_000_000_000,
    monotonicStart = 10_000_000_000,
  ) {
    this.monotonicOffset = trueTime - monotonicStart;
  }

  now(): number {
    return this.trueTime;
  }
  monotonic(): number {
    return this.trueTime - this.monotonicOffset;
  }
  advance(ms: number): void {
    this.trueTime += ms;
  }
  async sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.advance(ms);
  }
}

// ---------------------------------------------------------------------------------------------
// Application ports (lib/app/ports.ts): in-memory queue, broker, lifecycle event source, engine
// ---------------------------------------------------------------------------------------------

/** A MessageQueue in memory: keeps what was sent and delayed; `refuse` decides per message whether it is refused. */
export class InMemoryQueue implements MessageQueue {
  readonly sent: OutgoingMessage[] = [];
  readonly delays: Array<{ receiptHandle: string; seconds: number }> = [];
  /** A refusal for the message, or undefined to accept it. */
  refuse: (message: OutgoingMessage) => Extract<SendOutcome, { accepted: false }> | undefined = () => undefined;
  /** When set, counts() rejects with it. */
  countsError: Error | undefined;
  /** When set, delay() rejects with it. */
  delayError: Error | undefined;
  private nextId = 1;

  constructor(readonly url = "memory://queue") {}

  async sendEach(messages: readonly OutgoingMessage[]): Promise<SendOutcome[]> {
    return messages.map((message) => {
      const refusal = this.refuse(message);
      if (refusal) return refusal;
      this.sent.push(message);
      return { accepted: true };
    });
  }
  async sendAll(messages: readonly OutgoingMessage[]): Promise<boolean[]> {
    return (await this.sendEach(messages)).map((outcome) => outcome.accepted);
  }
  async send(message: OutgoingMessage): Promise<void> {
    const [outcome] = await this.sendEach([message]);
    if (!outcome?.accepted) throw new Error(`${this.url} refused the message: ${outcome?.reason}`);
  }
  async delay(receiptHandle: string, seconds: number): Promise<void> {
    if (this.delayError) throw this.delayError;
    this.delays.push({ receiptHandle, seconds });
  }
  async counts(): Promise<QueueCounts> {
    if (this.countsError) throw this.countsError;
    return { visible: this.sent.length, inFlight: 0, delayed: 0 };
  }
  bodies(): string[] {
    return this.sent.map((message) => message.body);
  }
  /** What was sent, as the queue would deliver it next (receive count 1). */
  deliveries(): QueueMessage[] {
    return this.sent.map((message) => this.delivery(message.body));
  }
  /** A delivery of `body` from this queue. */
  delivery(body: string, receiveCount = 1): QueueMessage {
    const id = `m-${this.nextId++}`;
    return { id, body, receiveCount, receiptHandle: `receipt-${id}`, source: this.url };
  }
}

/** A Broker that answers discovery from a list and records what the use cases asked of it. */
export class FakeBroker implements Broker {
  identities: string[] = [];
  capped = false;
  discoverError: Error | undefined;
  prepareError: Error | undefined;
  publishError: Error | undefined;
  /** What closeIfPublishPending finds: a request still unconfirmed. */
  publishPending = false;
  discoveries = 0;
  startupsPublished = 0;
  rpcPrepared = 0;
  closes = 0;

  async discover(): Promise<DiscoveryResult> {
    this.discoveries++;
    if (this.discoverError) throw this.discoverError;
    return { identities: [...this.identities], replies: this.identities.length, skipped: 0, capped: this.capped };
  }
  async prepareRpc(): Promise<void> {
    if (this.prepareError) throw this.prepareError;
    this.rpcPrepared++;
  }
  async closeIfPublishPending(): Promise<boolean> {
    if (!this.publishPending) return false;
    this.publishPending = false;
    await this.close();
    return true;
  }
  async publishStartup(): Promise<void> {
    if (this.publishError) throw this.publishError;
    this.startupsPublished++;
  }
  async close(): Promise<void> {
    this.closes++;
  }
}

/**
 * A LifecycleEventSource over batches of events: each batch is read only while `leadsNow()` says
 * so (a batch not read stays pending), forwarded, and the outcomes recorded.
 */
export class FakeLifecycleEventSource implements LifecycleEventSource {
  readonly pending: BrokerEvent[][];
  readonly outcomes: ForwardOutcome[][] = [];
  runs: LifecycleEventRun[] = [];

  constructor(
    batches: BrokerEvent[][],
    readonly mode: "jetstream" | "core" = "jetstream",
  ) {
    this.pending = [...batches];
  }

  async run(run: LifecycleEventRun): Promise<{ mode: "jetstream" | "core"; led: boolean }> {
    this.runs.push(run);
    let led = false;
    const batches = this.pending.splice(0);
    for (const batch of batches) {
      if (!(await run.leadsNow())) {
        this.pending.push(batch);
        continue;
      }
      led = true;
      this.outcomes.push(await run.forward(batch));
    }
    return { mode: this.mode, led };
  }
}

/** A lifecycle event as the broker would deliver it. */
export function brokerEvent(body: string, options: { subject?: string; lastChance?: boolean } = {}): BrokerEvent {
  return {
    data: new TextEncoder().encode(body),
    subject: options.subject ?? "choria.lifecycle.event.startup.provision_mode_server",
    lastChance: options.lastChance ?? false,
  };
}

/** An engine that answers each host with a scripted outcome (default provisioned) and records what it was given. */
export class FakeEngine {
  readonly provisioned: HostWork[] = [];
  outcome: (work: HostWork) => ProvisionOutcome = (work) => ({ kind: "provisioned", identity: work.identity });

  async provision(work: HostWork): Promise<ProvisionOutcome> {
    this.provisioned.push(work);
    return this.outcome(work);
  }
}

/** The ids of a batch result, sorted, for comparisons independent of completion order. */
export function failedIds(result: BatchResult): string[] {
  return [...result.failedMessageIds].sort();
}
