import { createHash } from "node:crypto";
/**
 * The test doubles every suite shares: what a test observes (a recording logger and metrics), the
 * clocks it controls, and scripted or adapted ports (Choria RPC, pause gate, helper). One copy
 * each; a suite that needs a variant composes these rather than writing its own.
 */
import { PausedError, RpcStatusError, RpcTimeoutError } from "../../lib/errors";
import type { AnyMetricName } from "../../lib/ports/metric-names";
import type { AttemptWindow, PauseGate } from "../../lib/ports/lease-gate";
import type { ChoriaRpc, RpcCall, RpcReply } from "../../lib/ports/rpc";
import type { Clock } from "../../lib/ports/clock";
import type { HelperRequest, HelperResponse, HelperRunner } from "../../lib/ports/helper";
import type { LogAttributes, Logger } from "../../lib/ports/logger";
import type { MetricLabels, Metrics } from "../../lib/ports/metrics";
import type { BatchResult, Broker, BrokerEvent, ForwardOutcome, LifecycleEventRun, LifecycleEventSource, MessageQueue, OutgoingMessage, QueueCounts, QueueMessage, SendOutcome, DiscoveryResult, DiscoveredCollision } from "../../lib/app/use-case-ports";
import type { ProvisionOutcome } from "../../lib/engine/outcome";
import type { HostWork } from "../../lib/ports/host-work";

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

/** Metrics for code under test whose observations no test reads. */
export const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

/**
 * Virtual time that moves only when the test advances it or the code under test sleeps: a sleep
 * returns at once and moves time on by its length (every sleep is recorded). Several deployments
 * can share one true time through `skewed` clocks, each with its own wall-clock offset.
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
  /** A clock on this same true time whose wall clock reads `wallOffsetMs` off (and monotonic `monotonicOffsetMs`). */
  skewed(wallOffsetMs = 0, monotonicOffsetMs = 0): Clock & { advance(ms: number): void } {
    return {
      now: () => this.now() + wallOffsetMs,
      monotonic: () => this.monotonic() + monotonicOffsetMs,
      sleep: (ms) => this.sleep(ms),
      advance: (ms) => this.advance(ms),
    };
  }
}

/**
 * A clock that only moves when the test advances it; a sleep resolves once time has passed its
 * end (for code whose timers must stay pending until the test says so).
 */
export class ManualClock implements Clock {
  private sleepers: Array<{ at: number; resolve: () => void }> = [];
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  monotonic(): number {
    return this.current;
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.sleepers.push({ at: this.current + ms, resolve }));
  }
  async advance(ms: number): Promise<void> {
    await settle();
    this.current += ms;
    const due = this.sleepers.filter((sleeper) => sleeper.at <= this.current);
    this.sleepers = this.sleepers.filter((sleeper) => sleeper.at > this.current);
    for (const sleeper of due) sleeper.resolve();
    await settle();
  }
}

/** Lets every pending promise continuation run, so sleeps are registered / resumed. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Real time (wall and monotonic) that a test can move forward at once for every party sharing it. */
export interface JumpingClock extends Clock {
  jump(ms: number): void;
}

/**
 * Real time plus whatever the test has jumped; with `sleepDivisor`, sleeps last that many times
 * less (the backoff between RPC attempts shortened while the clocks the gate reads stay real).
 */
export function realClock(options: { sleepDivisor?: number } = {}): JumpingClock {
  const divisor = options.sleepDivisor ?? 1;
  let offsetMs = 0;
  return {
    now: () => Date.now() + offsetMs,
    monotonic: () => performance.now() + offsetMs,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms / divisor)),
    jump: (ms) => {
      offsetMs += ms;
    },
  };
}

export type ScriptedAnswer = Record<string, unknown> | Error;
export type Responder = (call: RpcCall) => ScriptedAnswer;

/** Answers per `agent#action`: a queue of scripted answers first, then the default responder. */
export class FakeRpc implements ChoriaRpc {
  readonly calls: RpcCall[] = [];
  private readonly queued = new Map<string, ScriptedAnswer[]>();
  private readonly responders = new Map<string, Responder>();
  /** Runs before each call is answered, e.g. to advance the clock. */
  beforeAnswer: (call: RpcCall) => void = () => {};

  respond(rpc: string, responder: Responder): this {
    this.responders.set(rpc, responder);
    return this;
  }

  queue(rpc: string, ...answers: ScriptedAnswer[]): this {
    this.queued.set(rpc, [...(this.queued.get(rpc) ?? []), ...answers]);
    return this;
  }

  callsTo(rpc: string): RpcCall[] {
    return this.calls.filter((call) => `${call.agent}#${call.action}` === rpc);
  }

  sequence(): string[] {
    return this.calls.map((call) => `${call.agent}#${call.action}`);
  }

  /** Answers to a call of `rpc` from other machines answering as the same identity, handed on after the deciding one (RpcCall.laterReplies). */
  alsoAnswer(rpc: string, answer: (call: RpcCall) => Record<string, unknown>): this {
    this.others.set(rpc, answer);
    return this;
  }

  private readonly others = new Map<string, (call: RpcCall) => Record<string, unknown>>();

  async call(call: RpcCall): Promise<RpcReply> {
    const { laterReplies, ...plain } = call;
    this.calls.push(structuredClone(plain));
    this.beforeAnswer(call);
    const rpc = `${call.agent}#${call.action}`;
    const answer = this.queued.get(rpc)?.shift() ?? this.responders.get(rpc)?.(call);
    if (answer === undefined) throw new RpcTimeoutError(call.identity, rpc, "no responder scripted");
    if (answer instanceof Error) throw answer;
    const other = this.others.get(rpc);
    // As the NATS client hands them on: possibly before the caller has read the deciding reply.
    if (other && laterReplies) {
      const data = other(call);
      laterReplies.onReply({ sender: call.identity, statuscode: 0, statusmsg: "OK", data }, createHash("sha256").update(JSON.stringify(data)).digest("hex").slice(0, 16));
    }
    return { sender: call.identity, statuscode: 0, statusmsg: "OK", data: answer };
  }
}

export function timeout(identity: string, rpc: string): RpcTimeoutError {
  return new RpcTimeoutError(identity, rpc, "no reply within the attempt timeout");
}

export function statusError(identity: string, rpc: string, statusmsg = "Incorrect provision token supplied"): RpcStatusError {
  return new RpcStatusError(identity, rpc, identity, 1, statusmsg);
}

/** A real Choria RPC whose per-attempt wait is capped, so a missing reply costs milliseconds, not the DDL timeout. */
export class CappedWaitRpc implements ChoriaRpc {
  constructor(
    private readonly inner: ChoriaRpc,
    private readonly capMs: number,
  ) {}

  call(call: RpcCall): Promise<RpcReply> {
    return this.inner.call({ ...call, timeoutMs: Math.min(call.timeoutMs, this.capMs) });
  }
}

/** A gate that is open until `close()` or until `closeWhen` says so; records every check. */
export class FakeGate implements PauseGate {
  readonly checks: { term: number; attemptTimeoutMs: number }[] = [];
  closeWhen: () => boolean = () => false;
  failure: Error = new PausedError("provisioning is paused");

  /** With a clock, windows end `attemptTimeoutMs` after the check on it; without, they never end. */
  constructor(private readonly clock?: Clock) {}

  close(failure?: Error): void {
    if (failure) this.failure = failure;
    this.closeWhen = () => true;
  }

  async assertOpen(term: number, attemptTimeoutMs: number): Promise<AttemptWindow> {
    this.checks.push({ term, attemptTimeoutMs });
    if (this.closeWhen()) throw this.failure;
    const endsBy = this.clock ? this.clock.monotonic() + attemptTimeoutMs : Number.POSITIVE_INFINITY;
    return { term, stampedAt: this.clock?.now() ?? Date.now(), endsBy };
  }
}

/** Answers every request with `answer` (or throws it); records the requests. */
export class FakeHelper implements HelperRunner {
  readonly requests: HelperRequest[] = [];
  constructor(public answer: HelperResponse | Error) {}
  async run(request: HelperRequest): Promise<HelperResponse> {
    this.requests.push(structuredClone(request));
    if (this.answer instanceof Error) throw this.answer;
    return structuredClone(this.answer);
  }
}

// ---------------------------------------------------------------------------------------------
// Application ports (lib/app/use-case-ports.ts): in-memory queue, broker, lifecycle event source, engine
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
  private consumer?: { clock: Clock; periodMs: number; freeAt: number; taken: number; sentAt: number[]; waitsMs: number[] };

  constructor(readonly url = "memory://queue") {}

  /**
   * From now on a consumer modelled on `clock` takes the oldest waiting message off, one every
   * 1000 / `perSecond` ms while there are any: counts() shows only what it has not taken, and each
   * message's wait from its send to its taking is recorded in the returned list.
   */
  workedOffAt(clock: Clock, perSecond: number): { waitsMs: number[] } {
    this.consumer = { clock, periodMs: 1_000 / perSecond, freeAt: clock.monotonic(), taken: 0, sentAt: [], waitsMs: [] };
    return this.consumer;
  }

  async sendEach(messages: readonly OutgoingMessage[]): Promise<SendOutcome[]> {
    this.workOff();
    return messages.map((message) => {
      const refusal = this.refuse(message);
      if (refusal) return refusal;
      this.sent.push(message);
      this.consumer?.sentAt.push(this.consumer.clock.monotonic());
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
    this.workOff();
    return { visible: this.sent.length - (this.consumer?.taken ?? 0), inFlight: 0, delayed: 0 };
  }
  /** Lets the modelled consumer take every message it would have taken by now. */
  private workOff(): void {
    const consumer = this.consumer;
    if (!consumer) return;
    const now = consumer.clock.monotonic();
    for (let sentAt = consumer.sentAt[consumer.taken]; sentAt !== undefined; sentAt = consumer.sentAt[consumer.taken]) {
      const takenAt = Math.max(sentAt, consumer.freeAt);
      if (takenAt > now) return;
      consumer.waitsMs.push(takenAt - sentAt);
      consumer.freeAt = takenAt + consumer.periodMs;
      consumer.taken++;
    }
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
  /** Identities that answered the next discoveries with two different replies. */
  collisions: DiscoveredCollision[] = [];
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
    return { identities: [...this.identities], replies: this.identities.length, skipped: 0, capped: this.capped, collisions: this.collisions };
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
