/**
 * The ports of the use cases, with the data types they carry: the message queues and dead letters,
 * the broker, the lifecycle event source, the site's renewal state, the site's registries and the
 * registry tables a merge reads. Adapters implement them (lib/aws for SQS, lib/nats for NATS,
 * lib/dynamodb for the tables); the use cases import no AWS or NATS client and no `aws-lambda` type.
 * The domain's own ports are in lib/ports/.
 */
import type { StoredHost } from "../admission/merge";

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
  /**
   * Identities that answered more than once with different bytes: two machines claim them
   * (byte-identical copies are one delivery). Each with a fingerprint of every distinct reply.
   */
  collisions?: DiscoveredCollision[];
}

export interface DiscoveredCollision {
  identity: string;
  replies: Array<{ reply: string; receivedAt: number }>;
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

/** What became of one event: the source acknowledges `handled` and `dead-lettered`, redelivers `retry`. */
export type ForwardOutcome = "handled" | "dead-lettered" | "retry";

export interface LifecycleEventRun {
  /** Monotonic ms at which the source stops reading. */
  until: number;
  /** Checked before reading: a deployment that does not lead reads nothing. */
  leadsNow(): Promise<boolean>;
  /** Hands a batch of events on; the outcomes tell the source which to acknowledge. */
  forward(events: BrokerEvent[]): Promise<ForwardOutcome[]>;
}

/** Where the bridge reads lifecycle events from (JetStream when a stream holds them, else core NATS). */
export interface LifecycleEventSource {
  /**
   * Hands events to `forward` until `until`: from a stream, the ones waiting (it returns once
   * none is left); from core NATS, the ones that arrive meanwhile. Stops as soon as `leadsNow` is
   * false. Says how it read and whether it led.
   */
  run(run: LifecycleEventRun): Promise<{ mode: "jetstream" | "core"; led: boolean }>;
}

/** The site's renewal state as stored, with the version a write must still find. */
export interface StoredRenewalState {
  state: RenewalState;
  /** 0 when nothing is stored yet. */
  version: number;
}

/** Where the site's renewal state lives, shared by its deployments (lib/dynamodb/renewal-store.ts). */
export interface RenewalStore {
  read(site: string): Promise<StoredRenewalState>;
  /** Stores `state` as version `version + 1` if the stored version is still `version`; false if another writer came first. */
  write(site: string, state: RenewalState, version: number): Promise<boolean>;
}

/** What one deployment last reported: the registry it uses, on its own clock. */
export interface RegistryReport {
  deploymentId: string;
  registryId: string;
  seenAt: number;
}

/** Which registry each deployment of the site uses (lib/dynamodb/site-registries.ts). */
export interface SiteRegistries {
  /** The id of the registry this deployment uses: made once, kept in that registry, so every deployment using it reads the same. */
  ownId(): Promise<string>;
  /** Records `report` and returns the latest report of every deployment of the site, this one's included. */
  report(report: RegistryReport): Promise<RegistryReport[]>;
}

/**
 * More work from the batch's own queue, so a container's workers do not idle while the batch waits
 * for its slowest item: the event source only delivers the next batch once this invocation returns.
 * Messages taken this way are the invocation's own to finish: `complete` marks one that was
 * handled for removal, and `settle` (at the end of the batch) sends what is still to be removed;
 * one whose handling threw is left alone, and comes back after the visibility its handler set (as a
 * reported failure would).
 */
export interface BatchRefill {
  /** Up to `max` more messages; none when the queue has none ready. */
  take(max: number): Promise<QueueMessage[]>;
  /** Marks a handled message for removal; the removal may wait to be sent with others. */
  complete(message: QueueMessage): void;
  /** Sends every removal not sent yet and answers the messages that could not be removed. */
  settle(): Promise<RemovalFailure[]>;
  /** Whether taking more is still allowed (time left in the invocation). */
  open(): boolean;
}

/** A finished message the queue did not remove: it comes back after its visibility timeout. */
export interface RemovalFailure {
  message: QueueMessage;
  reason: string;
}

/** A message received from a dead-letter queue, still on it until removed. */
export interface DeadLetterMessage {
  messageId: string;
  receiptHandle: string;
  body: string;
  /** String message attributes: `reason`, and for parked hosts `step`, `failures`, `identity`, `term`. */
  attributes: Record<string, string>;
  receiveCount: number;
  /** Epoch ms SQS first received the message (on the original queue for a redriven one). */
  sentAt: number | undefined;
}

export interface DeadLetterQueue {
  readonly url: string;
  /** Receives up to `max` messages, hidden for `hideSeconds`; repeated pages never return one twice. */
  receive(max: number, hideSeconds: number): Promise<DeadLetterMessage[]>;
  /** Makes received messages visible again at once. */
  unhide(messages: readonly DeadLetterMessage[]): Promise<void>;
  remove(message: DeadLetterMessage): Promise<void>;
}

/** One admission table as the merge reads and writes it; `V` is the store's attribute value, carried unread. */
export interface RegistryTable<V> {
  /** As the operator named it: a table name or ARN. */
  readonly name: string;
  /** The attributes that decide how long the table keeps an item (carried with an expiry). */
  readonly lifetimeAttributes: readonly string[];
  /** Every host entry of the site's partition, read consistently. */
  listHosts(site: string): Promise<Array<StoredHost<V>>>;
  readHost(site: string, identity: string): Promise<StoredHost<V> | undefined>;
  /**
   * Stores `host` if the table still holds `expected` for it (no entry, when undefined): "written"
   * when the table holds `host` afterwards, "changed" when it holds something else (another writer
   * came first, or a write whose outcome was unknown did not land).
   */
  putHost(host: StoredHost<V>, expected: StoredHost<V> | undefined): Promise<"written" | "changed">;
  /** The site's renewal state in this table. */
  readonly renewal: RenewalStore;
}

interface InFlightRenewal {
  /** Wall-clock epoch ms the reprovision request was vouched for by the gate. */
  sentAt: number;
  /** The lease term it was sent under. */
  term: number;
  /** When the credentials it replaces expire. */
  expiresAt: number;
  /**
   * The request left but no answer came: the node may be restarting (the reply was lost) or may
   * never have had it. It stays in flight, counted against the bound, until the host comes back
   * or shows it did not act (still provisioned with its old credentials after `unansweredHoldMs`).
   */
  unanswered?: boolean;
  /** Sent as a retry of a failed renewal: its outcome does not count again toward the wave's abort rule. */
  retry?: boolean;
}

export interface RenewalOutcome {
  identity: string;
  ok: boolean;
  at: number;
  reason?: string;
  /** A renewed host's time from the send until renewal saw it back: how long it held its place in flight. */
  outOfServiceMs?: number;
}

/** What an operator's `choria-provisioner renew` asks for. */
export type RenewSelection = { identities: readonly string[] } | { dueWithinMs: number } | { all: true };

/** An operator's request, carried out by the leader's runs under `term`. */
export interface RenewalRequest {
  term: number;
  requestedAt: number;
  by?: string;
  selection: RenewSelection;
  /**
   * When the leader's first run took the request, on the leader's clock: a host whose credentials
   * were issued after it has been renewed, so none is renewed twice however large the request.
   */
  acceptedAt?: number;
  /** Sends per minute while the request lasts, instead of `renew.rate`. */
  ratePerMinute?: number;
}

export interface RenewalState {
  inFlight: Record<string, InFlightRenewal>;
  /** The last `failure_window` outcomes, oldest first, one per host (a retry replaces its host's last outcome). */
  recent: RenewalOutcome[];
  /** Epoch ms of the requests that left in the last minute, answered or not. */
  sends: number[];
  paused?: { reason: string; at: number };
  request?: RenewalRequest;
  /**
   * The leader's last renew run, on its clock, and its term: the runs are what carry out an
   * operator's request, so without a recent one a request would wait for nothing.
   */
  lastRun?: { at: number; term: number };
  /** The renewal wave under way (docs/renewal.md, "Change control"); absent while renewal is idle. */
  wave?: RenewalWave;
}

/**
 * A renewal wave: from the first send after renewal was idle until a run finds nothing in flight
 * and nothing due. Slow start ramps its rate; the abort rule judges its first attempts.
 */
export interface RenewalWave {
  startedAt: number;
  /** The automatic send rate now: it ramps from `renew.start_rate` to `renew.rate` as renewals succeed. */
  ratePerMinute: number;
  /** Successes since the rate last went up. */
  successes: number;
  /** Hosts whose first renewal of the wave has an outcome, and of those, the ones that failed. */
  attempts: number;
  failures: number;
  /** The wave's last failed first attempt, which the abort's reason names. */
  lastFailure?: { identity: string; reason: string };
}
