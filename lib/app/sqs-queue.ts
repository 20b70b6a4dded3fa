/**
 * The SQS side of the app: batched sends with per-entry retries, dead-lettering with a reason,
 * visibility delays and approximate counts. Only the app composes it; the use cases see the small
 * interfaces in ports.ts.
 */
import {
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
  type SendMessageBatchRequestEntry,
} from "@aws-sdk/client-sqs";
import { silentLogger, systemClock, type Clock, type Logger } from "../ports";
import type { OutgoingMessage, QueueCounts, MessageQueue } from "./ports";

/** SendMessageBatch takes at most 10 entries. */
const BATCH_LIMIT = 10;
/** SQS message attributes carry a reason of at most this many characters here (the limit is 256 KiB; keep it readable). */
const REASON_LIMIT = 1_000;

export interface SqsMessageQueueOptions {
  client: SQSClient;
  url: string;
  logger?: Logger;
  clock?: Clock;
  /** Sends per entry before it counts as failed; default 3. */
  attempts?: number;
}

export class SqsMessageQueue implements MessageQueue {
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly attempts: number;

  constructor(private readonly options: SqsMessageQueueOptions) {
    this.logger = options.logger ?? silentLogger;
    this.clock = options.clock ?? systemClock;
    this.attempts = options.attempts ?? 3;
  }

  get url(): string {
    return this.options.url;
  }

  async sendAll(messages: readonly OutgoingMessage[]): Promise<boolean[]> {
    const accepted = messages.map(() => false);
    for (let start = 0; start < messages.length; start += BATCH_LIMIT) {
      const indexes = messages.slice(start, start + BATCH_LIMIT).map((_, offset) => start + offset);
      await this.sendChunk(messages, indexes, accepted);
    }
    return accepted;
  }

  async send(message: OutgoingMessage): Promise<void> {
    await this.options.client.send(
      new SendMessageCommand({ QueueUrl: this.options.url, MessageBody: message.body, MessageAttributes: attributesOf(message) }),
    );
  }

  async delay(receiptHandle: string, seconds: number): Promise<void> {
    await this.options.client.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: this.options.url, ReceiptHandle: receiptHandle, VisibilityTimeout: seconds }),
    );
  }

  async counts(): Promise<QueueCounts> {
    const { Attributes = {} } = await this.options.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: this.options.url,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
      }),
    );
    const count = (name: string) => Number(Attributes[name as keyof typeof Attributes] ?? 0);
    return {
      visible: count("ApproximateNumberOfMessages"),
      inFlight: count("ApproximateNumberOfMessagesNotVisible"),
      delayed: count("ApproximateNumberOfMessagesDelayed"),
    };
  }

  private async sendChunk(messages: readonly OutgoingMessage[], indexes: number[], accepted: boolean[]): Promise<void> {
    let pending = indexes;
    for (let attempt = 1; attempt <= this.attempts && pending.length > 0; attempt++) {
      if (attempt > 1) await this.clock.sleep(100 * 2 ** (attempt - 2));
      const entries: SendMessageBatchRequestEntry[] = pending.map((index) => {
        const message = messages[index] as OutgoingMessage;
        return {
          Id: String(index),
          MessageBody: message.body,
          MessageAttributes: attributesOf(message),
          ...(message.delaySeconds ? { DelaySeconds: message.delaySeconds } : {}),
        };
      });
      try {
        const result = await this.options.client.send(new SendMessageBatchCommand({ QueueUrl: this.options.url, Entries: entries }));
        for (const entry of result.Successful ?? []) accepted[Number(entry.Id)] = true;
        const failed = result.Failed ?? [];
        if (failed.length > 0) {
          this.logger.warn("SQS refused some messages of a batch", {
            queue: this.options.url,
            attempt,
            failed: failed.length,
            codes: [...new Set(failed.map((entry) => entry.Code))].join(","),
          });
        }
      } catch (error) {
        this.logger.warn("sending a batch to SQS failed", { queue: this.options.url, attempt, entries: entries.length, error: String(error) });
      }
      pending = pending.filter((index) => !accepted[index]);
    }
  }
}

function attributesOf(message: OutgoingMessage): SendMessageBatchRequestEntry["MessageAttributes"] {
  if (!message.attributes) return undefined;
  return Object.fromEntries(
    Object.entries(message.attributes).map(([name, value]) => [name, { DataType: "String", StringValue: value.slice(0, REASON_LIMIT) || "-" }]),
  );
}
