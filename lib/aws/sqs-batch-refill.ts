/**
 * The provision function's BatchRefill over SQS: more host work from the queue its event source
 * reads (ReceiveMessage without waiting, so an empty queue ends refilling at once), and the removal
 * of what it finished (the event source only deletes the records it delivered), ten to a
 * DeleteMessageBatch: a removal waits for nine more or for the end of the batch (`settle`). A finished
 * message stays hidden past the invocation's deadline, so a removal sent at the end is not late; one
 * never sent (the container died) comes back after that, and the registry knows its host is done.
 *
 * A receive is taken with a short visibility, and only what it answered is then held for the rest
 * of the invocation. A receive whose answer is lost (the client gave up on a slow answer after SQS
 * had already handed the messages out) would otherwise hide them for the queue's visibility
 * timeout, six times the function's, with nobody working on them.
 */
import { ChangeMessageVisibilityBatchCommand, DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { BatchRefill, RemovalFailure, QueueMessage } from "../app/use-case-ports";
import { messageOf } from "../errors";

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
  /** How long a receive hides what it takes until the take is confirmed; default RECEIVE_VISIBILITY_SECONDS. */
  receiveVisibilitySeconds?: number;
}

/** Longer than a receive can take to answer (the queue client's attempts and their timeouts). */
const RECEIVE_VISIBILITY_SECONDS = 30;
/** A message in hand stays hidden a little past the invocation's deadline, so nobody else takes it while it is worked on. */
const HELD_PAST_DEADLINE_SECONDS = 30;

/** SQS answers at most ten messages per receive, and removes at most ten per batch. */
const RECEIVE_MAX = 10;
const DELETE_MAX = 10;

export class SqsBatchRefill implements BatchRefill {
  private readonly closesAt: number;
  /** Finished, not yet sent for removal. */
  private readonly finished: QueueMessage[] = [];
  /** Removals sent, each answering the messages it could not remove. */
  private readonly removals: Array<Promise<RemovalFailure[]>> = [];

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
        VisibilityTimeout: this.options.receiveVisibilitySeconds ?? RECEIVE_VISIBILITY_SECONDS,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    const received = reply.Messages ?? [];
    if (received.length === 0) return [];
    // What could not be held is not worked on here: it comes back to the queue after the short
    // visibility, instead of being worked on while another invocation can take it too.
    const hold = await this.options.client.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: this.options.queueUrl,
        Entries: received.map((message, index) => ({
          Id: String(index),
          ReceiptHandle: message.ReceiptHandle ?? "",
          VisibilityTimeout: Math.ceil(this.options.remainingMs() / 1000) + HELD_PAST_DEADLINE_SECONDS,
        })),
      }),
    );
    const held = new Set((hold.Successful ?? []).map((entry) => entry.Id));
    return received.filter((_, index) => held.has(String(index))).map((message) => ({
      id: message.MessageId ?? "",
      body: message.Body ?? "",
      receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 1),
      receiptHandle: message.ReceiptHandle ?? "",
      source: this.options.queueUrl,
    }));
  }

  complete(message: QueueMessage): void {
    this.finished.push(message);
    if (this.finished.length >= DELETE_MAX) this.sendRemoval();
  }

  async settle(): Promise<RemovalFailure[]> {
    while (this.finished.length > 0) this.sendRemoval();
    return (await Promise.all(this.removals.splice(0))).flat();
  }

  private sendRemoval(): void {
    this.removals.push(this.remove(this.finished.splice(0, DELETE_MAX)));
  }

  private async remove(messages: QueueMessage[]): Promise<RemovalFailure[]> {
    try {
      const reply = await this.options.client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.options.queueUrl,
          Entries: messages.map((message, index) => ({ Id: String(index), ReceiptHandle: message.receiptHandle })),
        }),
      );
      return (reply.Failed ?? []).flatMap((failed) => {
        const message = messages[Number(failed.Id)];
        return message ? [{ message, reason: `${failed.Code ?? "failed"}: ${failed.Message ?? "no reason given"}` }] : [];
      });
    } catch (error) {
      return messages.map((message) => ({ message, reason: messageOf(error) }));
    }
  }
}
