/**
 * The helper's stderr is quoted in errors, hence in the registry's last error, `status` and the
 * dead-letter attributes. A helper may print anything there, the keys it was given or returned
 * among them: mask every secret we know of, then keep only a short tail.
 */
import { isSecretAttributeName, Redactor } from "../observability/redact";
import type { HelperRequest } from "../ports";

/** Characters of redacted stderr an error quotes at most. */
const STDERR_SHOWN_CHARS = 512;
/** Claim and output values shorter than this are left alone: masking them would garble ordinary words. */
const MIN_VALUE_LENGTH = 6;
/** Lines of a multi-line secret (a PEM's base64 rows) this long are masked on their own too. */
const MIN_LINE_LENGTH = 16;
/** A `"name": "value"` pair of JSON text, complete or not. */
const JSON_PAIR = /"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)"/g;

export interface HelperTextSecrets {
  /** The configuration's secret values. */
  secrets?: Iterable<string>;
  /** What the helper was given: its JWT claims hold the provisioning token. */
  request?: HelperRequest;
  /** What the helper printed on stdout, parsed or not: its `key` and any secret-named value. */
  output?: Uint8Array;
}

/**
 * Masks, then cuts: a secret the cut would split is already masked whole. The text should be much
 * longer than what is shown (the runner keeps 16 KiB), so a secret it starts inside of is cut away.
 */
export function redactHelperText(text: string, known: HelperTextSecrets): string {
  if (text === "") return text;
  const masked = new Redactor(variants(collect(known))).text(text);
  return masked.length > STDERR_SHOWN_CHARS ? `…${masked.slice(-STDERR_SHOWN_CHARS)}` : masked;
}

function collect(known: HelperTextSecrets): string[] {
  const values = [...(known.secrets ?? [])];
  const claims = (value: unknown): void => {
    if (typeof value === "string") values.push(value);
    else if (value && typeof value === "object") Object.values(value).forEach(claims);
  };
  claims(known.request?.jwt);
  if (known.output && known.output.byteLength > 0) {
    for (const [, name, raw] of new TextDecoder().decode(known.output).matchAll(JSON_PAIR)) {
      if (name !== undefined && raw !== undefined && isSecretAttributeName(unescape(name))) values.push(unescape(raw), raw);
    }
  }
  return values.filter((value) => value.length >= MIN_VALUE_LENGTH);
}

/** Each secret as printed raw, JSON-escaped, and line by line (a PEM re-wrapped or printed in part). */
function variants(values: readonly string[]): string[] {
  const all = new Set<string>();
  for (const value of values) {
    all.add(value);
    all.add(JSON.stringify(value).slice(1, -1));
    for (const line of value.split(/\r?\n/)) if (line.trim().length >= MIN_LINE_LENGTH) all.add(line.trim());
  }
  return [...all];
}

function unescape(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}
