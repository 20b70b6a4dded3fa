/**
 * Named errors shared across the provisioner. Every error carries an optional `cause` so the
 * underlying failure (a NATS timeout, a DynamoDB exception, a child process exit) is kept for
 * logs without being flattened into the message. Messages never contain secrets.
 */
/** The message of a thrown value, for logs and reasons (an Error's message, or the value as text). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class ProvisionerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration value is missing or invalid; `key` is the YAML key (dotted for nested keys). */
export class ConfigError extends ProvisionerError {
  constructor(
    readonly key: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`invalid configuration key "${key}": ${message}`, options);
  }
}

/** The pause gate is closed: this deployment does not hold the current lease term. */
export class PausedError extends ProvisionerError {}

/** The lease was lost (or its term is no longer current) while work was in progress. */
export class LeaseLostError extends PausedError {}

/**
 * An attempt (or helper run) is longer than one lease validity can ever cover: the gate would
 * never open for it. Not a pause: the work is parked in the dead-letter queue with this reason.
 */
export class AttemptExceedsLeaseError extends ProvisionerError {}

/** The lease store could not be reached or answered ambiguously; the gate reads closed. */
export class LeaseStoreError extends ProvisionerError {}

/** Base of every failed Choria RPC. `identity` is the target node, `rpc` is `agent#action`. */
export class RpcError extends ProvisionerError {
  constructor(
    readonly identity: string,
    readonly rpc: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${rpc} to ${identity} failed: ${message}`, options);
  }
}

/** No reply (or not exactly one) arrived from the target within the per-attempt timeout. */
export class RpcTimeoutError extends RpcError {}

/** The node answered with a non-zero mcorpc status code. */
export class RpcStatusError extends RpcError {
  constructor(
    identity: string,
    rpc: string,
    readonly sender: string,
    readonly statuscode: number,
    readonly statusmsg: string,
  ) {
    super(identity, rpc, `${sender} replied with status ${statuscode}: ${statusmsg}`);
  }
}

/** A reply could not be trusted or decoded: wrong sender, bad hash, malformed or oversized. */
export class RpcProtocolError extends RpcError {}

/**
 * The request never verifiably reached the broker (not sent, the connection failed or closed, or
 * the broker never confirmed it): a fault of our path, which says nothing about the node.
 */
export class RpcTransportError extends RpcError {}

/** The user helper failed: timeout, non-zero exit, empty or undecodable output, invalid fields. */
export class HelperError extends ProvisionerError {}

/** A provisioning or server JWT failed verification, or a signing key could not be used. */
export class JwtError extends ProvisionerError {}

/** A CSR from a node was missing, unparseable, or names a denied / mismatching identity. */
export class CsrError extends ProvisionerError {}

/** A node's Ed25519 reply failed verification (missing key, bad hex, bad nonce signature). */
export class NonceSignatureError extends ProvisionerError {}

/** Input from outside (queue message, lifecycle event, wire envelope) failed validation. */
export class InvalidInputError extends ProvisionerError {}

/** The helper asked to defer configuration; the host is retried later. */
export class DeferredError extends ProvisionerError {}
