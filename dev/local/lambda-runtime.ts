/**
 * A small emulation of the parts of AWS Lambda the provisioner relies on, so the real handlers run
 * locally the way AWS runs them:
 *
 * - `SqsEventSource`: an SQS event source mapping. Pollers receive up to `batchSize` messages with
 *   long polling, build a real `SQSEvent`, invoke the handler with a Lambda-like context, and with
 *   `ReportBatchItemFailures` delete only the records the handler did not report as failed. Failed
 *   records (and every record of a batch whose invocation threw or timed out) stay on the queue and
 *   come back after their visibility timeout; the queue's RedrivePolicy moves them to the DLQ after
 *   `maxReceiveCount` receives (fauxqs 1.9.2 honours RedrivePolicy on receive, as SQS does).
 *   `maxConcurrency` bounds concurrent invocations, like the mapping's `maximumConcurrency`.
 * - `ScheduleSource`: an EventBridge rate schedule. It fires every `rateMs` whether or not the
 *   previous invocation has finished (EventBridge does not wait either).
 *
 * A "crash" (`kill()`) makes every running invocation's `getRemainingTimeInMillis()` return 0 and
 * starts no new ones: handlers that honour their deadline stop at the next check, which is as close
 * to a frozen Lambda sandbox as an in-process emulation gets.
 */
import { randomUUID } from "node:crypto";
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type Message, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord, ScheduledEvent } from "aws-lambda";
import { LOCAL_AWS } from "./services";
import { messageOf } from "../../lib/errors";
import { silentLogger, type Logger } from "../../lib/ports/logger";

export interface FunctionSpec {
  /** Function name as deployed, e.g. `choria-provisioner-local-provision`. */
  name: string;
  timeoutMs: number;
  memoryMb: number;
}

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void>;
export type ScheduleHandler = (event: ScheduledEvent, context: Context) => Promise<unknown>;

export interface InvocationRecord {
  functionName: string;
  durationMs: number;
  memoryMb: number;
  failed: boolean;
}

/** Every invocation made through the emulator, for progress, cost and the benchmark. */
export class InvocationLedger {
  readonly records: InvocationRecord[] = [];

  add(record: InvocationRecord): void {
    this.records.push(record);
  }

  count(functionName?: string): number {
    return functionName === undefined ? this.records.length : this.records.filter((r) => r.functionName === functionName).length;
  }

  /** Billed GB-seconds (Lambda bills by the millisecond). */
  gbSeconds(): number {
    return this.records.reduce((sum, r) => sum + (Math.ceil(r.durationMs) / 1000) * (r.memoryMb / 1024), 0);
  }

  byFunction(): Record<string, { invocations: number; failed: number; gbSeconds: number }> {
    const summary: Record<string, { invocations: number; failed: number; gbSeconds: number }> = {};
    for (const r of this.records) {
      const entry = (summary[r.functionName] ??= { invocations: 0, failed: 0, gbSeconds: 0 });
      entry.invocations++;
      if (r.failed) entry.failed++;
      entry.gbSeconds += (Math.ceil(r.durationMs) / 1000) * (r.memoryMb / 1024);
    }
    return summary;
  }
}

/** A running invocation's deadline, which a crash collapses to "now". */
class Deadline {
  private killed = false;
  constructor(private readonly at: number) {}
  kill(): void {
    this.killed = true;
  }
  remaining(): number {
    return this.killed ? 0 : Math.max(0, this.at - Date.now());
  }
}

function lambdaContext(spec: FunctionSpec, deadline: { remaining(): number }): Context {
  const requestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: spec.name,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:${LOCAL_AWS.region}:000000000000:function:${spec.name}`,
    memoryLimitInMB: String(spec.memoryMb),
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${spec.name}`,
    logStreamName: `local/[$LATEST]${requestId.replaceAll("-", "")}`,
    getRemainingTimeInMillis: () => deadline.remaining(),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Runs invocations of one function and tracks them, so a crash or a stop reaches all of them. */
class FunctionRunner {
  private readonly running = new Set<{ deadline: Deadline; done: Promise<unknown> }>();
  private dead = false;

  constructor(
    readonly spec: FunctionSpec,
    private readonly ledger: InvocationLedger,
    private readonly logger: Logger,
  ) {}

  get alive(): boolean {
    return !this.dead;
  }

  get inFlight(): number {
    return this.running.size;
  }

  /** Invokes `body` as one invocation; resolves with its result, or rejects on throw or timeout. */
  async invoke<T>(body: (context: Context) => Promise<T>): Promise<T> {
    const deadline = new Deadline(Date.now() + this.spec.timeoutMs);
    const context = lambdaContext(this.spec, deadline);
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.spec.name} ${context.awsRequestId} timed out after ${this.spec.timeoutMs} ms`)),
        this.spec.timeoutMs,
      );
    });
    const work = body(context);
    const entry = { deadline, done: work.catch(() => undefined) };
    this.running.add(entry);
    let failed = false;
    try {
      return await Promise.race([work, timedOut]);
    } catch (error) {
      failed = true;
      this.logger.warn("invocation failed", { function: this.spec.name, requestId: context.awsRequestId, error: messageOf(error) });
      throw error;
    } finally {
      clearTimeout(timer);
      // A timed-out handler keeps running in this process; its deadline is already past.
      void entry.done.finally(() => this.running.delete(entry));
      this.ledger.add({ functionName: this.spec.name, durationMs: performance.now() - started, memoryMb: this.spec.memoryMb, failed });
    }
  }

  /** Crash: no new invocations; running ones see no time left. */
  kill(): void {
    this.dead = true;
    for (const entry of this.running) entry.deadline.kill();
  }

  /** Waits (bounded) for the running invocations to return after a kill. */
  async settle(maxWaitMs: number): Promise<void> {
    const all = Promise.all([...this.running].map((entry) => entry.done));
    await Promise.race([all, new Promise((resolve) => setTimeout(resolve, maxWaitMs).unref())]);
  }
}

export interface EventSource {
  readonly name: string;
  start(): void;
  /** Crash: stop at once, collapse running invocations' deadlines. */
  kill(): void;
  /** Graceful stop: kill, then wait (bounded) for running invocations. */
  stop(maxWaitMs?: number): Promise<void>;
  readonly inFlight: number;
}

export interface SqsEventSourceOptions {
  sqs: SQSClient;
  queueUrl: string;
  queueArn: string;
  function: FunctionSpec;
  handler: SqsHandler;
  ledger: InvocationLedger;
  /** Records per invocation (Lambda default 10). Above 10, several receives fill one batch. */
  batchSize?: number;
  /** Longest wait to fill a batch above 10 records (the mapping's MaximumBatchingWindowInSeconds). */
  batchingWindowMs?: number;
  /** Long-poll wait per ReceiveMessage (Lambda's pollers use 20 s). */
  waitTimeSeconds?: number;
  /** Concurrent invocations (the mapping's maximumConcurrency, min 2). */
  maxConcurrency?: number;
  /** `FunctionResponseTypes: [ReportBatchItemFailures]`. Default true. */
  reportBatchItemFailures?: boolean;
  logger?: Logger;
  /** Told of every batch delivered: when its poller had it and when the invocation returned (bench: time in the queue, a batch's tail). */
  onDelivery?: (delivery: Delivery) => void;
}

export interface Delivery {
  functionName: string;
  records: readonly SQSRecord[];
  /** Epoch ms: the batch was complete and its invocation started. */
  invokedAt: number;
  /** Epoch ms: the invocation returned (or failed). */
  returnedAt: number;
}

/**
 * Pollers that long-poll an idle queue: Lambda keeps five (an idle mapping shows about 15 empty
 * receives a minute in CloudWatch, three 20 s polls each), fewer when `maxConcurrency` is lower,
 * and adds pollers once messages arrive.
 */
const IDLE_POLLERS = 5;
/** How long after a receive that returned messages the extra pollers keep polling. */
const BUSY_HOLD_MS = 5_000;
/** How often an extra poller looks whether the queue has become busy (no request is made). */
const EXTRA_POLLER_WAKE_MS = 250;

/** An SQS event source mapping for one queue and one function. */
export class SqsEventSource implements EventSource {
  readonly name: string;
  /** Epoch ms until which the queue counts as busy: every poller polls. */
  private busyUntil = 0;
  private readonly runner: FunctionRunner;
  private readonly loops: Promise<void>[] = [];
  private readonly abort = new AbortController();
  private readonly logger: Logger;

  constructor(private readonly options: SqsEventSourceOptions) {
    this.name = options.function.name;
    this.logger = options.logger ?? silentLogger;
    this.runner = new FunctionRunner(options.function, options.ledger, this.logger);
  }

  get inFlight(): number {
    return this.runner.inFlight;
  }

  start(): void {
    const pollers = Math.max(1, this.options.maxConcurrency ?? 5);
    for (let i = 0; i < pollers; i++) this.loops.push(this.poll(i >= IDLE_POLLERS));
  }

  kill(): void {
    this.abort.abort();
    this.runner.kill();
  }

  async stop(maxWaitMs = 5_000): Promise<void> {
    this.kill();
    await this.runner.settle(maxWaitMs);
    await Promise.all(this.loops);
  }

  /** One poller; an `extra` one (beyond the idle five) polls only while the queue is busy. */
  private async poll(extra: boolean): Promise<void> {
    while (!this.abort.signal.aborted) {
      if (extra && Date.now() >= this.busyUntil) {
        await sleep(EXTRA_POLLER_WAKE_MS, this.abort.signal);
        continue;
      }
      let messages: Message[];
      try {
        messages = await this.receiveBatch();
      } catch (error) {
        if (this.abort.signal.aborted) return;
        this.logger.warn("event source receive failed", { function: this.name, error: messageOf(error) });
        await sleep(1_000, this.abort.signal);
        continue;
      }
      if (messages.length === 0 || this.abort.signal.aborted) continue;
      this.busyUntil = Date.now() + BUSY_HOLD_MS;
      await this.deliver(messages);
    }
  }

  private async receive(max: number, waitTimeSeconds: number): Promise<Message[]> {
    const reply = await this.options.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.options.queueUrl,
        MaxNumberOfMessages: Math.min(10, max),
        WaitTimeSeconds: waitTimeSeconds,
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
      }),
      { abortSignal: this.abort.signal },
    );
    return reply.Messages ?? [];
  }

  private async receiveBatch(): Promise<Message[]> {
    const batchSize = this.options.batchSize ?? 10;
    const batch = await this.receive(batchSize, this.options.waitTimeSeconds ?? 20);
    if (batch.length === 0 || batchSize <= 10) return batch;
    const windowEnds = Date.now() + (this.options.batchingWindowMs ?? 0);
    while (batch.length < batchSize && Date.now() < windowEnds && !this.abort.signal.aborted) {
      const more = await this.receive(batchSize - batch.length, 0);
      if (more.length === 0) await sleep(20, this.abort.signal);
      batch.push(...more);
    }
    return batch;
  }

  private async deliver(messages: Message[]): Promise<void> {
    const event: SQSEvent = { Records: messages.map((message) => sqsRecordFromMessage(message, this.options.queueArn)) };
    let response: SQSBatchResponse | void;
    const invokedAt = Date.now();
    const delivered = () => this.options.onDelivery?.({ functionName: this.name, records: event.Records, invokedAt, returnedAt: Date.now() });
    try {
      response = await this.runner.invoke((context) => this.options.handler(event, context));
    } catch {
      delivered();
      // The whole batch becomes visible again after its visibility timeout, as on AWS.
      return;
    }
    delivered();
    const succeeded = this.successes(event, response);
    if (succeeded.length > 0) await this.delete(succeeded);
  }

  /** Lambda's rules: a malformed failure report fails the whole batch. */
  private successes(event: SQSEvent, response: SQSBatchResponse | void): SQSRecord[] {
    if (!(this.options.reportBatchItemFailures ?? true) || !response || !Array.isArray(response.batchItemFailures)) {
      return event.Records;
    }
    const ids = new Set(event.Records.map((record) => record.messageId));
    const failed = new Set<string>();
    for (const failure of response.batchItemFailures) {
      const id = failure?.itemIdentifier;
      if (typeof id !== "string" || !ids.has(id)) {
        this.logger.warn("invalid batchItemFailures entry: the whole batch is retried", { function: this.name, itemIdentifier: id });
        return [];
      }
      failed.add(id);
    }
    return event.Records.filter((record) => !failed.has(record.messageId));
  }

  private async delete(records: SQSRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += 10) {
      const chunk = records.slice(i, i + 10);
      try {
        const reply = await this.options.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: chunk.map((record, index) => ({ Id: String(index), ReceiptHandle: record.receiptHandle })),
          }),
        );
        if (reply.Failed?.length) this.logger.warn("event source could not delete records", { function: this.name, failed: reply.Failed.length });
      } catch (error) {
        // Undeleted records are redelivered: at-least-once, as on AWS.
        this.logger.warn("event source delete failed", { function: this.name, error: messageOf(error) });
      }
    }
  }


}

function toRecordAttributes(attributes: Message["MessageAttributes"]): SQSMessageAttributes {
  const converted: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    converted[name] = {
      dataType: value.DataType ?? "String",
      ...(value.StringValue === undefined ? {} : { stringValue: value.StringValue }),
      ...(value.BinaryValue === undefined ? {} : { binaryValue: Buffer.from(value.BinaryValue).toString("base64") }),
      stringListValues: [],
      binaryListValues: [],
    };
  }
  return converted;
}

export interface ScheduleSourceOptions {
  function: FunctionSpec;
  handler: ScheduleHandler;
  ledger: InvocationLedger;
  rateMs: number;
  /** Fire once at start instead of one rate later (a deployment's first tick). Default true. */
  fireAtStart?: boolean;
  /** The function's reservedConcurrency: a tick that finds this many invocations running is throttled (skipped). */
  reservedConcurrency?: number;
  logger?: Logger;
}

/** An EventBridge `rate(...)` schedule targeting one function. */
export class ScheduleSource implements EventSource {
  readonly name: string;
  private readonly runner: FunctionRunner;
  private timer: NodeJS.Timeout | undefined;
  private readonly logger: Logger;

  constructor(private readonly options: ScheduleSourceOptions) {
    this.name = options.function.name;
    this.logger = options.logger ?? silentLogger;
    this.runner = new FunctionRunner(options.function, options.ledger, this.logger);
  }

  get inFlight(): number {
    return this.runner.inFlight;
  }

  start(): void {
    if (this.options.fireAtStart ?? true) this.fire();
    this.timer = setInterval(() => this.fire(), this.options.rateMs);
  }

  /** Fires one extra invocation now (like `sls invoke` of the scheduled function). */
  fire(): void {
    if (!this.runner.alive) return;
    const reserved = this.options.reservedConcurrency;
    if (reserved !== undefined && this.runner.inFlight >= reserved) return;
    const event = scheduledEvent(this.options.function.name);
    void this.runner.invoke((context) => this.options.handler(event, context)).catch(() => undefined);
  }

  kill(): void {
    clearInterval(this.timer);
    this.runner.kill();
  }

  async stop(maxWaitMs = 5_000): Promise<void> {
    this.kill();
    await this.runner.settle(maxWaitMs);
  }
}

function scheduledEvent(functionName: string): ScheduledEvent {
  return {
    version: "0",
    id: randomUUID(),
    "detail-type": "Scheduled Event",
    source: "aws.events",
    account: "000000000000",
    time: new Date().toISOString(),
    region: LOCAL_AWS.region,
    resources: [`arn:aws:events:${LOCAL_AWS.region}:000000000000:rule/${functionName}-schedule`],
    detail: {},
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** The record Lambda's SQS event source builds from a received message. */
export function sqsRecordFromMessage(message: Message, queueArn: string): SQSRecord {
  const attributes = message.Attributes ?? {};
  return {
    messageId: message.MessageId ?? "",
    receiptHandle: message.ReceiptHandle ?? "",
    body: message.Body ?? "",
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? "1",
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? "000000000000",
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: toRecordAttributes(message.MessageAttributes),
    md5OfBody: message.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: queueArn,
    awsRegion: LOCAL_AWS.region,
  };
}
