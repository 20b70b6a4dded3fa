/**
 * SQS as the simulation needs it: at-least-once delivery (a sent message may be delivered twice),
 * deliveries in random order, visibility timeouts, a visibility change by receipt handle, and the
 * redrive to a dead-letter queue after `maxReceiveCount` receives. A send may be taken while its
 * answer says it was not (an ambiguous send). Consumers are told when a message may be visible.
 */
import type { MessageQueue, OutgoingMessage, QueueCounts, QueueMessage, SendOutcome } from "../../../lib/app/use-case-ports";
import type { Faults } from "./faults";
import type { VirtualTime } from "./time";

interface Stored {
  id: string;
  body: string;
  attributes: Record<string, string>;
  receiveCount: number;
  visibleAt: number;
  receipt: string;
  /** The last receive's visibility ran out without a delete or a visibility change. */
  lapsed: boolean;
}

export interface SimQueueOptions {
  visibilityTimeoutMs: number;
  /** Receives after which a message moves to `deadLetters` (SQS redrive). */
  maxReceiveCount?: number;
  deadLetters?: SimQueue;
}

export class SimQueue implements MessageQueue {
  private readonly messages = new Map<string, Stored>();
  private sequence = 0;
  /** Every message ever taken (sent or redriven), by id: what a run accounts for at its end. */
  readonly taken: Array<{ id: string; body: string; attributes: Record<string, string> }> = [];
  private readonly watchers: Array<(at: number) => void> = [];

  constructor(
    readonly url: string,
    private readonly time: VirtualTime,
    private readonly faults: Faults,
    private readonly options: SimQueueOptions,
  ) {}

  /** `wake(at)` is called with each instant a message may become visible. */
  watch(wake: (at: number) => void): void {
    this.watchers.push(wake);
  }

  async sendEach(messages: readonly OutgoingMessage[]): Promise<SendOutcome[]> {
    return messages.map((message) => {
      this.put(message.body, message.attributes ?? {}, (message.delaySeconds ?? 0) * 1_000);
      // A duplicate is the same message delivered twice: it waits out its delay too.
      if (this.faults.strikes("sqs-duplicate", this.faults.rates.sqsDuplicate)) this.put(message.body, message.attributes ?? {}, (message.delaySeconds ?? 0) * 1_000);
      if (this.faults.strikes("sqs-send-ambiguous", this.faults.rates.sqsSendAmbiguous)) {
        return { accepted: false, permanent: false, reason: "simulated: the send applied and its answer was lost" };
      }
      return { accepted: true };
    });
  }

  async sendAll(messages: readonly OutgoingMessage[]): Promise<boolean[]> {
    return (await this.sendEach(messages)).map((outcome) => outcome.accepted);
  }

  async send(message: OutgoingMessage): Promise<void> {
    const [outcome] = await this.sendEach([message]);
    if (!outcome?.accepted) throw new Error(`the queue did not take the message: ${outcome && !outcome.accepted ? outcome.reason : "no answer"}`);
  }

  async delay(receiptHandle: string, seconds: number): Promise<void> {
    const message = [...this.messages.values()].find((candidate) => candidate.receipt === receiptHandle);
    if (!message) throw new Error(`simulated SQS: receipt handle ${receiptHandle} is not current`);
    message.visibleAt = this.time.now + seconds * 1_000;
    message.lapsed = false;
    this.notify(message.visibleAt);
  }

  async counts(): Promise<QueueCounts> {
    const counts = { visible: 0, inFlight: 0, delayed: 0 };
    for (const message of this.messages.values()) {
      if (message.visibleAt <= this.time.now) counts.visible++;
      else if (message.receiveCount > 0) counts.inFlight++;
      else counts.delayed++;
    }
    return counts;
  }

  /** Up to `max` visible messages, in random order; each becomes invisible for the visibility timeout. */
  receive(max: number): QueueMessage[] {
    const visible = [...this.messages.values()].filter((message) => message.visibleAt <= this.time.now);
    const delivered: QueueMessage[] = [];
    while (delivered.length < max && visible.length > 0) {
      const message = visible.splice(Math.floor(this.faults.random() * visible.length), 1)[0]!;
      if (message.lapsed) this.faults.hit("sqs-visibility-expired");
      message.receiveCount++;
      const { maxReceiveCount, deadLetters } = this.options;
      if (maxReceiveCount !== undefined && deadLetters && message.receiveCount > maxReceiveCount) {
        this.messages.delete(message.id);
        deadLetters.put(message.body, { ...message.attributes, redrivenFrom: this.url }, 0);
        continue;
      }
      message.receipt = `${message.id}/${message.receiveCount}`;
      message.visibleAt = this.time.now + this.options.visibilityTimeoutMs;
      message.lapsed = true;
      this.notify(message.visibleAt);
      delivered.push({ id: message.id, body: message.body, receiveCount: message.receiveCount, receiptHandle: message.receipt, source: this.url });
    }
    return delivered;
  }

  /** Removes a message by its id (SQS deletes by receipt handle; a stale one still deletes). */
  remove(id: string): void {
    this.messages.delete(id);
  }

  /** Messages still held (visible, in flight or delayed), with their bodies. */
  held(): Array<{ id: string; body: string; attributes: Record<string, string> }> {
    return [...this.messages.values()].map(({ id, body, attributes }) => ({ id, body, attributes }));
  }

  private put(body: string, attributes: Record<string, string>, delayMs: number): void {
    const id = `${this.url.split("/").at(-1)}-${++this.sequence}`;
    const visibleAt = this.time.now + delayMs;
    this.messages.set(id, { id, body, attributes, receiveCount: 0, visibleAt, receipt: "", lapsed: false });
    this.taken.push({ id, body, attributes });
    this.notify(visibleAt);
  }

  private notify(at: number): void {
    for (const wake of this.watchers) wake(at);
  }
}
