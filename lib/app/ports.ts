/**
 * What the use cases need from the message queues. The SQS adapter implements it; the use cases
 * never import an AWS client.
 */

export interface OutgoingMessage {
  body: string;
  /** String message attributes, e.g. `reason` on a dead-lettered message. */
  attributes?: Record<string, string>;
  delaySeconds?: number;
}

export interface QueueCounts {
  visible: number;
  inFlight: number;
  delayed: number;
}

/** What became of one message of `sendEach`. */
export type SendOutcome =
  | { accepted: true }
  /** `permanent`: SQS will never take this message as it is (invalid characters, too large); retrying is pointless. */
  | { accepted: false; permanent: boolean; reason: string };

export interface MessageQueue {
  readonly url: string;
  /** Sends in batches, retrying refused entries; resolves with whether each message was accepted. */
  sendAll(messages: readonly OutgoingMessage[]): Promise<boolean[]>;
  /** Like sendAll, with the reason for each message that was not accepted. */
  sendEach(messages: readonly OutgoingMessage[]): Promise<SendOutcome[]>;
  /** One message; throws when SQS did not accept it. */
  send(message: OutgoingMessage): Promise<void>;
  /** Keeps a received message invisible for `seconds` (it comes back after that). */
  delay(receiptHandle: string, seconds: number): Promise<void>;
  counts(): Promise<QueueCounts>;
}
