/**
 * What the use cases need from the queues and the host registry's table beyond lib/admission. The
 * adapters (SQS, DynamoDB) implement these; the use cases never import an AWS client.
 */
import type { HostClaim } from "../admission/registry";
import type { HostWork } from "../ports";

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

export interface MessageQueue {
  readonly url: string;
  /** Sends in batches, retrying refused entries; resolves with whether each message was accepted. */
  sendAll(messages: readonly OutgoingMessage[]): Promise<boolean[]>;
  /** One message; throws when SQS did not accept it. */
  send(message: OutgoingMessage): Promise<void>;
  /** Keeps a received message invisible for `seconds` (it comes back after that). */
  delay(receiptHandle: string, seconds: number): Promise<void>;
  counts(): Promise<QueueCounts>;
}

export type RegistryState = "queued" | "provisioning" | "provisioned";

export interface RegistrySummary {
  total: number;
  byState: Record<RegistryState, number>;
  /** Hosts whose last attempt failed and will be retried, with the reason. */
  lastErrors: Array<{ identity: string; term: number; lastError: string; lastErrorAt: number }>;
}

/**
 * Operations on the admission table that the registry does not offer: giving a claim back for a
 * retry (keeping the admission, recording why), undoing an admission whose work could not be
 * queued, and the operator's override of the once-per-interval rule.
 */
export interface HostRecords {
  /** Ends `claim` without ending the admission, so a redelivery of the same work can claim it again. */
  releaseClaim(claim: HostClaim, reason: string): Promise<boolean>;
  /** Deletes the admission of `work` if it is still queued and unclaimed (its message was never sent). */
  forgetQueued(work: HostWork): Promise<boolean>;
  /** Deletes the host's entry unless a worker holds an unexpired claim on it; false when one does. */
  forgetUnlessClaimed(identity: string): Promise<boolean>;
  summary(): Promise<RegistrySummary>;
}
