/**
 * Named errors shared across the provisioner. Every error carries an optional `cause` so the
 * underlying failure (a NATS timeout, a DynamoDB exception, a child process exit) is kept for
 * logs without being flattened into the message. Messages never contain secrets.
 */
/** Causes followed at most: a chain longer than this is a loop or noise, not more information. */
const MAX_CAUSES = 5;

/**
 * The message of a thrown value with its cause chain, for logs and reasons: "the lease store could
 * not be reached: connect ECONNREFUSED 127.0.0.1:8000". Without the causes an operator cannot tell
 * a wrong ARN from a timeout. Messages only (no stacks); a cause whose text the message already
 * carries is not repeated. Secrets are masked by the loggers, which know their values.
 */
export function messageOf(error: unknown): string {
  return withCauseChain(describe(error) || "a value that is not an Error was thrown", error);
}

/**
 * `text` followed by each link of `error`'s chain (the error, then its causes) that `text` does not
 * already carry: a log line that says what failed, then why, down to the timeout or the
 * AccessDeniedException under it.
 */
export function withCauseChain(text: string, error: unknown): string {
  let result = text;
  for (const link of chainOf(error)) {
    const part = describe(link);
    if (part !== "" && !carries(result, link, part)) result = result === "" ? part : `${result}: ${part}`;
  }
  return result;
}

/** One cause as a log record lists it: its name (an Error's) and its own message. */
export interface CauseLink {
  name?: string;
  message: string;
}

/**
 * The causes under `error`, nearest first, each by name and own message: what a log record's
 * error field lists, so a query can select on the name (AccessDeniedException, TimeoutError) of
 * any link. The same links, and the same stops, as `messageOf`.
 */
export function causesOf(error: unknown): CauseLink[] {
  return chainOf(error)
    .slice(1)
    .map((cause) => (cause instanceof Error ? { name: cause.name, message: cause.message || describe(cause) } : { message: describeValue(cause) }));
}

/**
 * `error` and the causes under it, nearest first: no link twice (a cause pointing back into the
 * chain), at most MAX_CAUSES causes, and none from a parse or schema failure on.
 */
function chainOf(error: unknown): unknown[] {
  const chain = [error];
  for (let cause = causeOf(error); cause !== undefined && !chain.includes(cause) && chain.length <= MAX_CAUSES; cause = causeOf(cause)) {
    if (quotesInput(cause)) break;
    chain.push(cause);
  }
  return chain;
}

/**
 * Whether `text` already says what `link` adds: its description, or for an RPC failure its reason,
 * which the error that gave up on the call quotes under its own "<rpc> to <identity> failed: ".
 */
function carries(text: string, link: unknown, part: string): boolean {
  return text.includes(part) || (link instanceof RpcError && link.reason !== "" && text.includes(link.reason));
}

/** One link of the chain: the message, else the error code or name (Node's AggregateError for ECONNREFUSED has an empty message). */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return describeValue(error);
  const code = (error as { code?: unknown }).code;
  const named = error.name !== "Error" && !error.message.includes(error.name) ? error.name : undefined;
  if (error.message !== "") {
    // An AWS SDK error's name is the exception (AccessDeniedException, ThrottlingException): keep it.
    return named && !(error instanceof ProvisionerError) ? `${named}: ${error.message}` : error.message;
  }
  if (error instanceof AggregateError) {
    const inner = error.errors.map(describe).filter((part) => part !== "");
    if (inner.length > 0) return [...new Set(inner)].join("; ");
  }
  return typeof code === "string" ? code : error.name;
}

/**
 * A thrown or attached value that is not an Error (an abort signal's reason, say): a primitive as
 * it is, an object by its `message` when it has one. `String()` of an object says `[object Object]`.
 */
function describeValue(value: unknown): string {
  if (typeof value !== "object" || value === null) return String(value);
  const message = (value as { message?: unknown }).message;
  return typeof message === "string" ? message : "";
}

/**
 * A parse or schema failure under an error that already says what was invalid ("not JSON", the
 * field and rule): its own message quotes the input (a queue message, helper output), which may
 * hold anything, so it is not repeated.
 */
function quotesInput(error: unknown): boolean {
  return error instanceof SyntaxError || (error instanceof Error && error.name === "ZodError");
}

function causeOf(error: unknown): unknown {
  return error instanceof Error ? (error as { cause?: unknown }).cause : undefined;
}

export class ProvisionerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration value is missing or invalid; `key` is the YAML key (dotted for nested keys). */
export class ConfigError extends ProvisionerError {
  /** What is wrong with the key, without the key: the message is `invalid configuration key "<key>": <reason>`. */
  readonly reason: string;

  constructor(
    readonly key: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`invalid configuration key "${key}": ${reason}`, options);
    this.reason = reason;
  }
}

/**
 * Every problem one configuration has, so one run names them all. `key` and `reason` are the
 * first's; the message lists the others after it.
 */
export class ConfigProblemsError extends ConfigError {
  constructor(readonly problems: readonly [ConfigError, ...ConfigError[]]) {
    const [first, ...rest] = problems;
    super(first.key, first.reason, { cause: first.cause });
    if (rest.length > 0) {
      this.message += ` (and ${rest.length} more: ${rest.map((problem) => `"${problem.key}": ${problem.reason}`).join("; ")})`;
    }
  }
}

/** The pause gate is closed: this deployment does not hold the current lease term. */
export class PausedError extends ProvisionerError {}

/** The lease was lost (or its term is no longer current) while work was in progress. */
export class LeaseLostError extends PausedError {}

/**
 * The term is ours, but the validity left after the last round does not cover the attempt (a
 * round keeping the lease that took seconds to answer under load counts from before it was sent). Not a lost lease:
 * a later round gives a fresh validity.
 */
export class LeaseValidityShortError extends PausedError {}

/**
 * The lease item names this deployment as its live holder, but the last round could not confirm
 * it for this invocation (a keep whose write timed out and whose settling read found it not yet
 * applied, or a round of an earlier invocation). Not known to be lost, so no work may be dropped for it.
 */
export class LeaseUnconfirmedError extends PausedError {}

/**
 * An attempt (or helper run) is longer than one lease validity can ever cover: the gate would
 * never open for it. Not a pause: the work is parked in the dead-letter queue with this reason.
 */
export class AttemptExceedsLeaseError extends ProvisionerError {}

/** The lease store could not be reached or answered ambiguously; the gate reads closed. */
export class LeaseStoreError extends ProvisionerError {}

/** Base of every failed Choria RPC. `identity` is the target node, `rpc` is `agent#action`. */
export class RpcError extends ProvisionerError {
  /** What went wrong, without the "<rpc> to <identity> failed: " the message starts with. */
  readonly reason: string;

  constructor(
    readonly identity: string,
    readonly rpc: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${rpc} to ${identity} failed: ${reason}`, options);
    this.reason = reason;
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

/** Text that is not valid in its encoding; the message is Go's, so both reject alike and say so alike. */
export class EncodingError extends ProvisionerError {}

/** DER that cannot be encoded or decoded as the certificate code needs it. */
export class DerError extends ProvisionerError {}

/** The X25519 exchange failed: a key of the wrong size, or a low-order peer key (all-zero secret). */
export class EcdhError extends ProvisionerError {}

/** A node's Ed25519 reply failed verification (missing key, bad hex, bad nonce signature). */
export class NonceSignatureError extends ProvisionerError {}

/** Input from outside (queue message, lifecycle event, wire envelope) failed validation. */
export class InvalidInputError extends ProvisionerError {}

/** The helper asked to defer configuration; the host is retried later. */
export class DeferredError extends ProvisionerError {}

/** An environment variable the functions need is missing or invalid; `variable` names it. */
/** One environment variable of the functions that is missing or unreadable. */
export interface SettingProblem {
  readonly variable: string;
  readonly message: string;
}

/** The functions' environment is incomplete or wrong: every bad variable, named, in one message. */
export class AppSettingsError extends ProvisionerError {
  constructor(readonly problems: readonly SettingProblem[]) {
    const lines = problems.map((problem) => `${problem.variable}: ${problem.message}`);
    super(problems.length === 1 ? `invalid environment variable ${lines.join("")}` : `invalid environment variables: ${lines.join("; ")}`);
  }
}

/** The renewal state of a site could not be read or written. */
export class RenewalStoreError extends ProvisionerError {}

/** A DynamoDB write described inconsistently (a programming error in a store, never a stored value). */
export class DynamoDbExpressionError extends ProvisionerError {}

/** The id of the registry a deployment uses could not be found or made (lib/app/site-memory.ts). */
export class SiteRegistriesError extends ProvisionerError {}

/** Another writer kept winning the version check. */
export class RenewalContentionError extends RenewalStoreError {}

/** The renewal settings make no schedule: a rate, bound or timeout that is not positive. */
export class InvalidRenewalSettingsError extends ProvisionerError {}

/** The attempt's send-by instant passed (or the attempt settled) before its request could be published: nothing was sent. */
export class RpcNotSentError extends RpcTransportError {}

/** A secret store could not give a value; the message names the reference, never a value. */
export class SecretResolutionError extends ProvisionerError {}

/** A table or queue that is not there: names it and where it was looked for. */
export class StackNotFoundError extends ProvisionerError {}

/** The broker refused or could not be reached. The message names servers, never credentials. */
export class BrokerConnectionError extends ProvisionerError {}
