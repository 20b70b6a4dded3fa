import { ProvisionerError, RpcError } from "../errors";
import type { QuarantineEvidence } from "../admission/quarantine";

/**
 * The invocation would run out of time before the next attempt (or helper run) could finish. The
 * host was not harmed; its work goes back to the queue for another invocation.
 */
export class OutOfTimeError extends ProvisionerError {
  constructor(
    readonly what: string,
    readonly neededMs: number,
    readonly remainingMs: number,
  ) {
    super(`not enough time left for ${what}: needs ${neededMs} ms, ${Math.max(0, Math.floor(remainingMs))} ms remain`);
  }
}

/** Every attempt of a call failed; `cause` is the last attempt's error. */
export class RpcRetriesExhaustedError extends RpcError {
  constructor(
    identity: string,
    rpc: string,
    readonly tries: number,
    lastError: unknown,
  ) {
    super(identity, rpc, `gave up after ${tries} ${tries === 1 ? "try" : "tries"}: ${reasonOf(lastError, identity, rpc)}`, {
      cause: lastError,
    });
  }
}

/** The credentials a node was about to be given could not be recorded first, so it was not configured; retried. */
export class CredentialsNotRecordedError extends ProvisionerError {}

/** The upgrade step could not run or failed (fatal unless `upgrades_optional`). */
export class UpgradeError extends ProvisionerError {}

/** The helper's private key could not be made ready for transport to the node. */
export class KeyTransportError extends ProvisionerError {}

/** The server JWT for a node's ed25519 key could not be made. */
export class ServerJwtError extends ProvisionerError {}

// The last attempt's RpcError already says "<rpc> to <identity> failed: "; keep its reason only so
// the wrapping message does not repeat it.
function reasonOf(error: unknown, identity: string, rpc: string): string {
  if (error instanceof RpcError && error.identity === identity && error.rpc === rpc) return error.reason;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Two machines answered one request as the same identity (docs/audit.md): the host is quarantined
 * with `evidence`, never configured. Its message names fingerprints only.
 */
export class IdentityCollisionError extends ProvisionerError {
  constructor(
    readonly identity: string,
    readonly evidence: QuarantineEvidence,
    options?: { cause?: unknown },
  ) {
    super(`${identity}: ${evidence.reason}`, options);
  }
}
