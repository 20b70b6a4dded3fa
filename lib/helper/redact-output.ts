/**
 * The helper's stderr is quoted in errors, hence in the registry's last error, `status` and the
 * dead-letter attributes. A helper may print anything there, the keys it was given or returned
 * among them: mask every secret we know of and everything shaped like key material, then keep only
 * a short tail.
 */
import { isSecretAttributeName, REDACTED, Redactor } from "../observability/redact";
import type { HelperRequest } from "../ports/helper";

/** Characters of redacted stderr an error quotes at most. */
const STDERR_SHOWN_CHARS = 512;
/** Claim and output values shorter than this are left alone: masking them would garble ordinary words. */
const MIN_VALUE_LENGTH = 6;
/** Lines of a multi-line secret (a PEM's base64 rows) this long are masked on their own too. */
const MIN_LINE_LENGTH = 16;
/** A `"name": "value"` pair of JSON text, complete or not. */
const JSON_PAIR = /"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)"/g;

/**
 * Key material by its shape, whoever printed it and whether or not we know its value. A private
 * key's PEM block is masked whole, or from its BEGIN to the end of the text when the END is not
 * there (the helper was killed while printing it). A 64-hex run is how Choria stores an ed25519
 * seed; it masks a SHA-256 digest or a public key as well, which costs a diagnostic, not a secret.
 */
const SECRET_SHAPES: readonly RegExp[] = [
  /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)/g,
  // A compact JWT (a JOSE header is JSON, `{"` in base64url is `eyJ`), signed or not. The header
  // is bounded, and taken whole by a lookahead (which never backtracks), so text full of `eyJ` is
  // not rescanned from each; a longer header is left, and its payload, itself `eyJ...`, matches.
  /\beyJ(?=([A-Za-z0-9_-]{0,512}))\1\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?/g,
  // An NKEY seed (user, account, operator, server, cluster, curve): `S`, its type, 56 base32 characters.
  /\bS[ACNOPUX][A-Z2-7]{56}\b/g,
  // No `\b` after the run: with one, a long hex run followed by a letter would be retried from
  // every length; without, that run is masked, which is safe.
  /\b[0-9a-fA-F]{64,}/g,
];
/** The END line of a private key whose BEGIN is not in the text: the kept tail starts inside it. */
const PEM_END = /-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----/g;
/** What a PEM body is made of: base64, line breaks, and the `\n` of a JSON-escaped one. */
const PEM_BODY_CHAR = /[A-Za-z0-9+/=\s\\]/;

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
  const masked = new Redactor(variants(collect(known))).text(maskSecretShapes(text));
  return masked.length > STDERR_SHOWN_CHARS ? `…${masked.slice(-STDERR_SHOWN_CHARS)}` : masked;
}

/**
 * What looks secret, for stdout and stderr alike: a value under a secret name (a token, a key, a
 * password...) or one shaped like key material.
 */
function looksSecret(name: string, value: string): boolean {
  return isSecretAttributeName(name) || maskSecretShapes(value) !== value;
}

/** The text with every run shaped like key material (SECRET_SHAPES) masked. */
function maskSecretShapes(text: string): string {
  let masked = text;
  for (const shape of SECRET_SHAPES) masked = masked.replace(shape, REDACTED);
  return maskHeadlessPem(masked);
}

/**
 * Masks the END line of a private key whose BEGIN was cut away and the body before it. It walks
 * back from each END in linear time; a regular expression with a leading repeat would retry it
 * from every character of a long run.
 */
function maskHeadlessPem(text: string): string {
  let result = "";
  let from = 0;
  for (const end of text.matchAll(PEM_END)) {
    let start = end.index;
    while (start > from && PEM_BODY_CHAR.test(text.charAt(start - 1))) start--;
    result += `${text.slice(from, start)}${REDACTED}`;
    from = end.index + end[0].length;
  }
  return from === 0 ? text : result + text.slice(from);
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
      if (name === undefined || raw === undefined) continue;
      const value = unescape(raw);
      // Its rows are masked line by line (variants), so a key printed re-wrapped or in part is caught too.
      if (looksSecret(unescape(name), value)) values.push(value, raw);
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
