/**
 * The ports of the use cases: what they need from the message queues, the broker and the
 * lifecycle event source, with the data types they carry. Adapters implement them (lib/aws for SQS,
 * lib/nats for NATS); the use cases import no AWS or NATS client and no `aws-lambda` type.
 */

/** One discovery broadcast, as the broker reports it. */
export interface DiscoveryResult {
  /** Unique identities, in the order first seen. */
  identities: string[];
  /** Every message received on the reply subject inside the window. */
  replies: number;
  /** Replies without a usable sender (undecodable transport, empty or unsafe name). */
  skipped: number;
  /** The window closed at `maxIdentities`: more nodes may have answered; the next discovery finds them. */
  capped: boolean;
}

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

/** One message delivered from a queue: what the use cases need of it, nothing more. */
export interface QueueMessage {
  id: string;
  body: string;
  /** How many times the queue has delivered it (1 on the first delivery). */
  receiveCount: number;
  /** Hands the message back to its queue (`MessageQueue.delay`). */
  receiptHandle: string;
  /** The queue it came from, recorded on a dead letter. */
  source?: string;
}

/** The messages of a batch that go back to their queue for a later delivery. */
export interface BatchResult {
  failedMessageIds: string[];
}

/** What a handler knows about its invocation. */
export interface InvocationContext {
  remainingMs(): number;
  requestId?: string;
}

/** The broker as the use cases need it: discovery, the engine's RPC client, the startup event. */
export interface Broker {
  /** Broadcast discovery on the current connection, bounded by `discovery_max_nodes`. */
  discover(): Promise<DiscoveryResult>;
  /** Makes the engine's RPC client use the current connection; call before provisioning. */
  prepareRpc(): Promise<void>;
  /**
   * Closes the connection when a request may still sit in its buffers unconfirmed by the broker,
   * so nothing is sent across a Lambda freeze; the next use reconnects. Returns whether it closed.
   */
  closeIfPublishPending(): Promise<boolean>;
  publishStartup(): Promise<void>;
  close(): Promise<void>;
}

/** A lifecycle event as the broker delivered it. */
export interface BrokerEvent {
  data: Uint8Array;
  subject: string;
  /** No redelivery follows if this delivery is not forwarded (core NATS, or the last JetStream delivery). */
  lastChance: boolean;
}

/** What the bridge did with one event: the source acknowledges `sent` and `dead-lettered`, redelivers `retry`. */
export type ForwardOutcome = "sent" | "dead-lettered" | "retry";

export interface LifecycleEventRun {
  /** Monotonic ms at which the source stops reading. */
  until: number;
  /** Checked before reading: a deployment that does not lead reads nothing. */
  leadsNow(): Promise<boolean>;
  forward(events: BrokerEvent[]): Promise<ForwardOutcome[]>;
}

/** Where the bridge reads lifecycle events from (JetStream when a stream holds them, else core NATS). */
export interface LifecycleEventSource {
  /** Reads and forwards events until `until`; says how it read and whether it ever led. */
  run(run: LifecycleEventRun): Promise<{ mode: "jetstream" | "core"; led: boolean }>;
}
