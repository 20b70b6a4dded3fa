/**
 * The provision function's BatchRefill over SQS: more host work from the queue its event source
 * reads (ReceiveMessage without waiting, so an empty queue ends refilling at once), and the removal
 * of what it finished (the event source only deletes the records it delivered).
 */
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { BatchRefill } from "../app/batch";
import type { QueueMessage } from "../app/use-case-ports";

export interface SqsBatchRefillOptions {
  client: SQSClient;
  queueUrl: string;
  /** The invocation's time left (its deadline margin already taken off). */
  remainingMs: () => number;
  /**
   * No more is taken once less than this is left: a host taken must be able to finish inside the
   * invocation (every RPC with its retries and the helper), or it waits out the visibility timeout.
   */
  stopBeforeDeadlineMs: number;
  /**
   * Nothing is taken later than this after the refill was made (with the invocation's lease
   * standing): taken work is handled under that standing, so it must stay shorter than a lease.
   */
  windowMs: number;
  /** Monotonic milliseconds. */
  monotonic: () => number;
}

/** SQS answers at most ten messages per receive. */
const RECEIVE_MAX = 10;

export class SqsBatchRefill implements BatchRefill {
  private readonly closesAt: number;

  constructor(private readonly options: SqsBatchRefillOptions) {
    this.closesAt = options.monotonic() + options.windowMs;
  }

  open(): boolean {
    return this.options.remainingMs() > this.options.stopBeforeDeadlineMs && this.options.monotonic() < this.closesAt;
  }

  async take(max: number): Promise<QueueMessage[]> {
    const reply = await this.options.client.send(
      new ReceiveMessageCommand({
        QueueUrl: this.options.queueUrl,
        MaxNumberOfMessages: Math.min(RECEIVE_MAX, Math.max(1, max)),
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    return (reply.Messages ?? []).map((message) => ({
      id: message.MessageId ?? "",
      body: message.Body ?? "",
      receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 1),
      receiptHandle: message.ReceiptHandle ?? "",
      source: this.options.queueUrl,
    }));
  }

  async complete(message: QueueMessage): Promise<void> {
    await this.options.client.send(new DeleteMessageCommand({ QueueUrl: this.options.queueUrl, ReceiptHandle: message.receiptHandle }));
  }
}
