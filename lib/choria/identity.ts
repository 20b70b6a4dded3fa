/**
 * Node identities end up inside NATS subjects (`provisioning.node.<identity>`). A name arriving from
 * the network (a discovery reply header, a lifecycle event, a queue message) must never be able to
 * widen a subject into a wildcard or address a different subject tree.
 */
import { InvalidInputError } from "../errors";

/** Per NATS: tokens are separated by `.`, `*` and `>` are wildcards, whitespace splits the protocol line. */
const WILDCARD_OR_SPACE = /[\s*>]/u;

function hasControlCharacter(text: string): boolean {
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Longest identity accepted; DNS names stop at 253 and the subject must stay well under max_payload. */
const MAX_IDENTITY_LENGTH = 255;

export function identityProblem(identity: string): string | undefined {
  if (identity.length === 0) return "is empty";
  if (identity.length > MAX_IDENTITY_LENGTH) return `is longer than ${MAX_IDENTITY_LENGTH} characters`;
  if (WILDCARD_OR_SPACE.test(identity) || hasControlCharacter(identity)) return "contains a NATS wildcard, whitespace or a control character";
  if (identity.startsWith(".") || identity.endsWith(".") || identity.includes("..")) return "contains an empty subject token";
  return undefined;
}

/** Throws InvalidInputError (the offending name JSON-quoted, so control characters stay visible). */
export function assertValidIdentity(identity: string, what = "node identity"): void {
  const problem = identityProblem(identity);
  if (problem) throw new InvalidInputError(`${what} ${JSON.stringify(identity.slice(0, 300))} ${problem}`);
}

/**
 * Why `identity` cannot tell one machine from another, or undefined when it can: `localhost` and
 * its variants, and names without a domain part (go-choria #2329: a host without a domain reports
 * its short name). Two machines answering as one such name would be provisioned as one.
 */
export function uniquenessProblem(identity: string, allowShortNames = false): string | undefined {
  const name = identity.toLowerCase();
  if (name === "localhost" || name.startsWith("localhost.")) return "is a localhost name, which every unconfigured machine has";
  if (!allowShortNames && !name.includes(".")) return "has no domain part, so machines of different domains can share it (allow_short_identities)";
  return undefined;
}
