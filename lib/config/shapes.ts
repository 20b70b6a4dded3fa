/**
 * What the value of a credential or key setting must look like, and a description of what a value
 * does look like that never repeats any part of it. A secret of the wrong shape (an ed25519 key as
 * 128 hex, the Secrets Manager console's default key/value JSON) must not end up in an error as a
 * "file path" or as anything else: these descriptions are all an error may say about it.
 */
import type { ReferenceSetting } from "./keys";

export interface ValueShape {
  /** What is accepted, as an error message says it. */
  readonly expected: string;
  readonly accepts: (value: string) => boolean;
}

const PEM = /^\s*-----BEGIN ([A-Z0-9 ]{1,40})-----/;
const HEX_32_BYTES = /^\s*[0-9a-fA-F]{64}\s*$/;
/** A compact JWS: three base64url parts, the last one may be empty (an unsigned token). */
const COMPACT_JWT = /^\s*[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\s*$/;

const isPem = (value: string): boolean => PEM.test(value);
const isHexKey = (value: string): boolean => HEX_32_BYTES.test(value);
const isCompactJwt = (value: string): boolean => COMPACT_JWT.test(value);

/** A plain credential: anything but nothing, and not a key/value JSON meant to hold it. */
const plainValue: ValueShape = {
  expected: "the plain value (in Secrets Manager a plaintext secret, not key/value pairs)",
  accepts: (value) => value.trim() !== "" && jsonObjectKeys(value) === undefined,
};
const pem = (what: string): ValueShape => ({ expected: `a PEM ${what} ("-----BEGIN ...")`, accepts: isPem });
const jwt: ValueShape = { expected: "a compact JWT (header.payload.signature)", accepts: isCompactJwt };
const seed: ValueShape = { expected: "an ed25519 seed as 64 hexadecimal characters", accepts: isHexKey };

/** The shape of each reference setting's resolved value: the material itself, never a file path. */
export const REFERENCE_SHAPES: Readonly<Record<ReferenceSetting, ValueShape>> = {
  token: plainValue,
  broker_provisioning_password: plainValue,
  nats_token: plainValue,
  client_jwt: jwt,
  client_seed: seed,
  jwt_signing_token: jwt,
  jwt_signing_key: { expected: "a PEM private key or an ed25519 seed as 64 hexadecimal characters", accepts: (v) => isPem(v) || isHexKey(v) },
  jwt_verify_cert: { expected: "a PEM certificate or public key, or an ed25519 public key as 64 hexadecimal characters", accepts: (v) => isPem(v) || isHexKey(v) },
  "tls.ca": pem("certificate"),
  "tls.cert": pem("certificate"),
  "tls.key": pem("private key"),
};

/**
 * Secret settings that, as in the Go daemon, name a file unless the value is the material itself.
 * A literal that is neither would be read as a path and named in the "could not be read" error.
 */
export const MATERIAL_OR_PATH: Readonly<Partial<Record<ReferenceSetting, ValueShape>>> = {
  jwt_signing_key: REFERENCE_SHAPES.jwt_signing_key,
  jwt_signing_token: REFERENCE_SHAPES.jwt_signing_token,
  "tls.key": REFERENCE_SHAPES["tls.key"],
};

/** Longest path Linux accepts; anything longer is not a file name. */
const PATH_MAX = 4096;
/** Runs of hex or base64 this long are key material (a 32-byte key or longer), not a file name. */
const LONG_HEX = /^[0-9a-fA-F]{64,}$/;
const LONG_BASE64 = /^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])[A-Za-z0-9+/=_-]{64,}$/;

/** Whether a value can be a file path rather than key material of some other shape. */
export function looksLikePath(value: string): boolean {
  if (value.length > PATH_MAX || /[\r\n\t]/.test(value) || value.trim() !== value || value === "") return false;
  if (jsonObjectKeys(value) !== undefined || /^[[{"]/.test(value)) return false;
  // Standard base64 has '/' in it: test the whole value as well as each path component.
  if (LONG_BASE64.test(value) && !value.includes(".")) return false;
  return !value.split("/").some((part) => LONG_HEX.test(part) || LONG_BASE64.test(part));
}

/** Key names short and word-like enough to be field names (`password`, `private_key`); anything else may be a value. */
const FIELD_NAME = /^[A-Za-z][A-Za-z_-]{0,31}$/;

/**
 * What a value looks like, in words that carry none of it: its kind, its length, the PEM label, the
 * key names of a JSON object when they are plainly field names. For errors about secrets.
 */
export function describeShape(value: string): string {
  const trimmed = value.trim();
  if (trimmed === "") return "an empty value";
  const label = PEM.exec(value)?.[1];
  if (label !== undefined) return `a PEM block of type ${label}`;
  const keys = jsonObjectKeys(trimmed);
  if (keys !== undefined) {
    const named = keys.length > 0 && keys.every((name) => FIELD_NAME.test(name));
    return named
      ? `a Secrets Manager key/value JSON with keys [${keys.join(", ")}]`
      : `a Secrets Manager key/value JSON with ${keys.length} key(s)`;
  }
  if (/^[[{"]/.test(trimmed)) return `JSON (${trimmed.length} characters)`;
  if (/^[0-9a-fA-F]+$/.test(trimmed)) {
    return trimmed.length === 128
      ? "128 hexadecimal characters (an ed25519 private key: seed and public key; the seed is its first 64)"
      : `${trimmed.length} hexadecimal characters`;
  }
  if (isCompactJwt(trimmed)) return `a compact JWT (${trimmed.length} characters)`;
  const lines = trimmed.split(/\r?\n/).length;
  if (lines > 1) return `${lines} lines of text (${trimmed.length} characters)`;
  if (/^[A-Za-z0-9+/=_-]{40,}$/.test(trimmed)) return `${trimmed.length} characters of base64`;
  return `${trimmed.length} characters of text`;
}

/** The keys of a JSON object, or undefined when the value is not one. */
function jsonObjectKeys(value: string): string[] | undefined {
  const trimmed = value.trim();
  if (!trimmed.startsWith("{")) return undefined;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? Object.keys(parsed) : undefined;
  } catch {
    return undefined;
  }
}
