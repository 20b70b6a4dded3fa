/** What one host's provisioning came to: the step it reached, the outcome's kinds, and a thrown error shaped into one. */
import { DeferredError, messageOf, PausedError, ProvisionerError, RpcTransportError } from "../errors";
import type { CredentialsExpiry, ProvisioningJwtExpiry } from "../ports/credentials";
import { CredentialsNotRecordedError, OutOfTimeError, RpcRetriesExhaustedError } from "./errors";

/** Where in the sequence an outcome arose. */
export type ProvisionStep =
  | "jwt"
  | "gen25519"
  | "inventory"
  | "gencsr"
  | "helper"
  | "shutdown"
  | "server_jwt"
  | "key"
  | "upgrade"
  | "configure"
  | "restart";

/** The node's provisioning JWT as it presented it, when it was authentic (valid, or expired) and expires. */
interface Presented {
  provisioningJwt?: ProvisioningJwtExpiry;
}

export type ProvisionOutcome =
  /** Configured and restarted; `credentials` when what it was given expires (the first to expire of certificate and server JWT). */
  | ({ kind: "provisioned"; identity: string; credentials?: CredentialsExpiry } & Presented)
  /** release_update accepted; the node restarts upgraded and is provisioned again. */
  | { kind: "upgrading"; identity: string; fromVersion: string; toVersion: string }
  /** The helper asked for a shutdown; `acknowledged` is false when the node answered with an error status. */
  | ({ kind: "shutdown"; identity: string; acknowledged: boolean } & Presented)
  /** The helper deferred; the host is retried on a later discovery or event. */
  | { kind: "deferred"; identity: string; error: DeferredError }
  /** `retryable`: the work should go back to the queue (the invocation ran out of time, or the broker path failed). */
  | ({ kind: "failed"; identity: string; step: ProvisionStep; error: ProvisionerError; retryable: boolean } & Presented)
  /** Work waited longer than 2 x interval. */
  | { kind: "skipped"; identity: string; reason: string }
  /** The pause gate closed; nothing more was sent to the node. */
  | { kind: "paused"; identity: string; step: ProvisionStep; error: PausedError };

/**
 * Whether the host stays "known" (not re-admitted) for KNOWN_AFTER_SUCCESS_MS, as Go delays the
 * removal of provisioned and shut-down hosts; upgrading hosts are forgotten at once so they are
 * provisioned as soon as they come back.
 */
export function keepsHostKnown(outcome: ProvisionOutcome): boolean {
  return outcome.kind === "provisioned" || outcome.kind === "shutdown";
}

/** Outcomes the Go daemon counts as `provisioned` (every other outcome is a `provision_error`). */
export function isSuccessfulOutcome(outcome: ProvisionOutcome): boolean {
  return outcome.kind === "provisioned" || outcome.kind === "upgrading" || outcome.kind === "shutdown";
}

export function classifyFailure(identity: string, step: ProvisionStep, error: unknown, provisioningJwt?: ProvisioningJwtExpiry): ProvisionOutcome {
  if (error instanceof PausedError) return { kind: "paused", identity, step, error };
  if (error instanceof DeferredError) return { kind: "deferred", identity, error };
  const named = error instanceof ProvisionerError ? error : new ProvisionerError(messageOf(error), { cause: error });
  const retryable = error instanceof OutOfTimeError || error instanceof CredentialsNotRecordedError || isTransportFailure(error);
  return { kind: "failed", identity, step, error: named, retryable, ...(provisioningJwt ? { provisioningJwt } : {}) };
}

/** The last attempt never verifiably reached the broker: nothing was learnt about the node, so it does not count against it. */
function isTransportFailure(error: unknown): boolean {
  return error instanceof RpcTransportError || (error instanceof RpcRetriesExhaustedError && error.cause instanceof RpcTransportError);
}
