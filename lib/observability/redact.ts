import { causesOf, messageOf } from "../errors";
import type { LogAttributes } from "../ports/logger";

export const REDACTED = "[redacted]";

/** Attribute-name words that mark a value as a credential (`natsToken`, `client_seed`, `signing-key`...). */
const SECRET_WORDS = new Set([
  "token",
  "tokens",
  "password",
  "passwords",
  "passwd",
  "pass",
  "secret",
  "secrets",
  "seed",
  "jwt",
  "key",
  "privatekey",
  "apikey",
  "credential",
  "credentials",
  "authorization",
  "cookie",
]);

/**
 * The userinfo of a URL (`nats://user:password@host`): everything up to the last `@` of the
 * whitespace-free run, so a password holding `@` or `/` is masked whole (masking too much is safe).
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)\S*@/gi;

/** A URL, or text holding URLs, with any `user:password@` replaced by `[redacted]@`. */
function maskUserinfo(text: string): string {
  return text.replace(URL_USERINFO, `$1${REDACTED}@`);
}

/** Known secret values shorter than this are not masked inside strings: too likely to be ordinary text. */
const MIN_MASKED_VALUE_LENGTH = 6;
const MAX_DEPTH = 10;

export function isSecretAttributeName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  return words.some((word) => SECRET_WORDS.has(word)) || SECRET_WORDS.has(name.toLowerCase().replace(/[^a-z0-9]/g, ""));
}

/**
 * Masks credentials in log attributes twice over: by attribute name (any key naming a token,
 * password, key, seed, secret or JWT) and by value (any occurrence of a known secret value inside
 * any string), so a secret passed under an innocent name is still caught.
 */
export class Redactor {
  private readonly secrets: string[];

  constructor(secretValues: Iterable<string> = []) {
    this.secrets = [...new Set(secretValues)]
      .filter((value) => value.length >= MIN_MASKED_VALUE_LENGTH)
      .sort((a, b) => b.length - a.length);
  }

  text(value: string): string {
    // A URL's password is masked even when its value is not known (a second line of defence: the
    // configuration refuses credentials in broker URLs).
    let masked = value.includes("@") ? maskUserinfo(value) : value;
    for (const secret of this.secrets) {
      if (masked.includes(secret)) masked = masked.split(secret).join(REDACTED);
    }
    return masked;
  }

  attributes(attributes: LogAttributes | undefined): LogAttributes | undefined {
    if (attributes === undefined) return undefined;
    return this.value(attributes, 0, new WeakSet()) as LogAttributes;
  }

  private value(value: unknown, depth: number, seen: WeakSet<object>): unknown {
    if (typeof value === "string") return this.text(value);
    if (typeof value !== "object" || value === null) return value;
    if (seen.has(value) || depth > MAX_DEPTH) return "[truncated]";
    seen.add(value);

    if (value instanceof Error) {
      // The message carries the cause chain (messages only): what an operator needs to tell a wrong
      // ARN from a timeout, without every cause's stack. `causes` names each link for queries.
      const causes = causesOf(value).map((link) => ({ ...link, message: this.text(link.message) }));
      return {
        name: value.name,
        message: this.text(messageOf(value)),
        ...(causes.length > 0 ? { causes } : {}),
        ...(value.stack ? { stack: this.text(value.stack) } : {}),
      };
    }
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") return this.value(toJSON.call(value), depth + 1, seen);
    if (Array.isArray(value)) return value.map((item) => this.value(item, depth + 1, seen));
    if (value instanceof Uint8Array) return `[${value.byteLength} bytes]`;

    const result: Record<string, unknown> = {};
    for (const [key, entry] of Object.entries(value)) {
      result[key] = isSecretAttributeName(key) && entry !== undefined && entry !== null && entry !== ""
        ? REDACTED
        : this.value(entry, depth + 1, seen);
    }
    return result;
  }
}
