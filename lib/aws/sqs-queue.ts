/**
 * The SQS side of the app: batched sends with per-entry retries, dead-lettering with a reason,
 * visibility delays and approximate counts. Only the composition builds it; the use cases see the small
 * interfaces in lib/app/use-case-ports.ts.
 */
import {
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
  type SendMessageBatchRequestEntry,
} from "@aws-sdk/client-sqs";
import { messageOf } from "../errors";
import { silentLogger, type Logger } from "../ports/logger";
import { systemClock, type Clock } from "../ports/clock";
import type { OutgoingMessage, QueueCounts, MessageQueue, SendOutcome } from "../app/use-case-ports";

/** SendMessageBatch takes at most 10 entries. */
const BATCH_LIMIT = 10;
/** SQS's limit for one message and for a whole batch (body plus attributes), in bytes. */
const SQS_MAX_BYTES = 1_048_576;
/**
 * Characters SQS refuses in a body or attribute (it accepts #x9 #xA #xD, #x20-#xD7FF, #xE000-#xFFFD
 * and #x10000-#x10FFFF): other control characters, lone surrogates, U+FFFE and U+FFFF.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const SQS_INVALID_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** SQS message attributes carry a reason of at most this many characters here (the limit is 256 KiB; keep it readable). */
const REASON_LIMIT = 1_000;

export interface SqsMessageQueueOptions {
  client: SQSClient;
  url: string;
  logger?: Logger;
  clock?: Clock;
  /** Sends per entry refused by SQS (not sender faults) before it counts as failed; default 3. A failed request is retried by the client only. */
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
    return (await this.sendEach(messages)).map((outcome) => outcome.accepted);
  }

  /**
   * Messages SQS can never take (invalid characters, over 1 MiB) are refused here without a request;
   * the rest go in batches of at most ten entries and 1 MiB, so one bad or large message never
   * holds back the good ones sent with it. An entry SQS refuses as the sender's fault is not retried.
   */
  async sendEach(messages: readonly OutgoingMessage[]): Promise<SendOutcome[]> {
    const outcomes: SendOutcome[] = messages.map(() => ({ accepted: false, permanent: false, reason: "not sent" }));
    let chunk: number[] = [];
    let chunkBytes = 0;
    const flush = async () => {
      if (chunk.length > 0) await this.sendChunk(messages, chunk, outcomes);
      chunk = [];
      chunkBytes = 0;
    };
    for (const [index, message] of messages.entries()) {
      const problem = sqsProblem(message);
      if (problem) {
        outcomes[index] = { accepted: false, permanent: true, reason: problem };
        continue;
      }
      const bytes = messageBytes(message);
      if (chunk.length === BATCH_LIMIT || chunkBytes + bytes > SQS_MAX_BYTES) await flush();
      chunk.push(index);
      chunkBytes += bytes;
    }
    await flush();
    return outcomes;
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

  private async sendChunk(messages: readonly OutgoingMessage[], indexes: number[], outcomes: SendOutcome[]): Promise<void> {
    const settled = (index: number) => outcomes[index]?.accepted || (outcomes[index] as { permanent?: boolean }).permanent === true;
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
        for (const entry of result.Successful ?? []) outcomes[Number(entry.Id)] = { accepted: true };
        const failed = result.Failed ?? [];
        for (const entry of failed) {
          // SenderFault: this entry as it is will never be accepted (e.g. InvalidMessageContents).
          const reason = `${entry.Code ?? "refused"}: ${entry.Message ?? "no message"}`;
          outcomes[Number(entry.Id)] = { accepted: false, permanent: entry.SenderFault === true, reason };
        }
        if (failed.length > 0) {
          this.logger.warn("SQS refused some messages of a batch", {
            queue: this.options.url,
            attempt,
            failed: failed.length,
            codes: [...new Set(failed.map((entry) => entry.Code))].join(","),
          });
        }
      } catch (error) {
        this.logger.warn("sending a batch to SQS failed", { queue: this.options.url, attempt, entries: entries.length, error });
        for (const index of pending) outcomes[index] = { accepted: false, permanent: false, reason: `SendMessageBatch failed: ${messageOf(error)}` };
        // The SDK client already retried the whole request; more rounds here would multiply its bound on a stalled path.
        return;
      }
      pending = pending.filter((index) => !settled(index));
    }
  }
}

function attributesOf(message: OutgoingMessage): SendMessageBatchRequestEntry["MessageAttributes"] {
  if (!message.attributes) return undefined;
  return Object.fromEntries(
    Object.entries(message.attributes).map(([name, value]) => [name, { DataType: "String", StringValue: value.slice(0, REASON_LIMIT) || "-" }]),
  );
}

/** Why SQS would refuse this message whatever the retries, or undefined. */
function sqsProblem(message: OutgoingMessage): string | undefined {
  const texts = [message.body, ...Object.entries(message.attributes ?? {}).flat()];
  for (const text of texts) {
    const match = SQS_INVALID_CHARACTER.exec(text);
    if (match) {
      const code = (match[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0");
      return `InvalidMessageContents: U+${code} at offset ${match.index}; SQS accepts only #x9, #xA, #xD and #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF`;
    }
  }
  const bytes = messageBytes(message);
  if (bytes > SQS_MAX_BYTES) return `MessageTooLong: ${bytes} bytes, SQS takes at most ${SQS_MAX_BYTES}`;
  return undefined;
}

/** What SQS counts against its size limits: the body and each attribute's name, type and value. */
function messageBytes(message: OutgoingMessage): number {
  let bytes = Buffer.byteLength(message.body, "utf8");
  for (const [name, value] of Object.entries(message.attributes ?? {})) {
    bytes += Buffer.byteLength(name, "utf8") + "String".length + Buffer.byteLength(value.slice(0, REASON_LIMIT) || "-", "utf8");
  }
  return bytes;
}
