/**
 * JWT claims read the way Go's tokens library reads them: registered times, the typed claims of a
 * provisioning token, a chain issuer's expiry, and the claims in the order the helper receives them.
 */
import { JwtError } from "../errors";
import type { ProvisioningJwtExpiry } from "../ports/credentials";

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Enforces exp and nbf exactly like golang-jwt v5 without leeway: valid while nbf <= now < exp. */
export function checkRegisteredTimes(claims: Record<string, unknown>, now: Date): void {
  const nowMs = now.getTime();
  const exp = numericDate(claims, "exp");
  const nbf = numericDate(claims, "nbf");
  numericDate(claims, "iat");
  if (exp !== undefined && !(nowMs < exp * 1000)) {
    throw new JwtError("token has invalid claims: token is expired");
  }
  if (nbf !== undefined && nowMs < nbf * 1000) {
    throw new JwtError("token has invalid claims: token is not valid yet");
  }
}

function numericDate(claims: Record<string, unknown>, name: string): number | undefined {
  const value = claims[name];
  if (value === undefined || value === null) {
    return undefined;
  }
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new JwtError(`token is malformed: claim ${name} is not a NumericDate`);
  }
  return value;
}

/** Verified claims of a node's provisioning JWT (tokens `ProvisioningClaims`). */
export interface ProvisioningClaims {
  cht: string;
  chs: boolean;
  chu?: string;
  chsrv?: string;
  chpd: boolean;
  chrd?: string;
  chf?: string;
  chusr?: string;
  chpwd?: string;
  extensions: Record<string, unknown> | null;
  /** Defaulted to "choria" when the token has none, as the Go parser does. */
  ou: string;
  v2?: boolean;
  update?: boolean;
  purpose?: string;
  tcs?: string;
  public_key?: string;
  issexp?: number;
  iss?: string;
  sub?: string;
  aud?: string | string[];
  exp?: number;
  nbf?: number;
  iat?: number;
  jti?: string;
  /** The claim object exactly as decoded from the token. */
  raw: Record<string, unknown>;
}

const STRING_CLAIMS = ["cht", "chu", "chsrv", "chrd", "chf", "chusr", "chpwd", "ou", "purpose", "tcs", "public_key", "iss", "sub", "jti"] as const;
const BOOLEAN_CLAIMS = ["chs", "chpd", "v2", "update"] as const;
const NUMERIC_CLAIMS = ["issexp", "exp", "nbf", "iat"] as const;

function present(value: unknown): boolean {
  return value !== undefined && value !== null;
}

/** Decodes claims into typed fields; a wrongly typed claim is malformed, as Go's json decoding is. */
export function typedProvisioningClaims(raw: Record<string, unknown>): ProvisioningClaims {
  const claims: Record<string, unknown> = {};
  for (const name of STRING_CLAIMS) {
    if (!present(raw[name])) continue;
    if (typeof raw[name] !== "string") throw new JwtError(`token is malformed: claim ${name} must be a string`);
    if (raw[name] !== "") claims[name] = raw[name];
  }
  for (const name of BOOLEAN_CLAIMS) {
    if (!present(raw[name])) continue;
    if (typeof raw[name] !== "boolean") throw new JwtError(`token is malformed: claim ${name} must be a boolean`);
    claims[name] = raw[name];
  }
  for (const name of NUMERIC_CLAIMS) {
    if (!present(raw[name])) continue;
    if (typeof raw[name] !== "number") throw new JwtError(`token is malformed: claim ${name} must be a NumericDate`);
    claims[name] = raw[name];
  }
  const aud = raw.aud;
  if (present(aud)) {
    const valid = typeof aud === "string" || (Array.isArray(aud) && aud.every((entry) => typeof entry === "string"));
    if (!valid) throw new JwtError("token is malformed: claim aud must be a string or an array of strings");
    claims.aud = aud;
  }
  const extensions = raw.extensions;
  if (present(extensions) && !isPlainObject(extensions)) {
    throw new JwtError("token is malformed: claim extensions must be an object");
  }
  return {
    ...claims,
    cht: typeof claims.cht === "string" ? claims.cht : "",
    chs: claims.chs === true,
    chpd: claims.chpd === true,
    extensions: isPlainObject(extensions) ? extensions : null,
    ou: typeof claims.ou === "string" ? claims.ou : "choria",
    raw,
  } as ProvisioningClaims;
}

/** A token with a trust chain signature needs a `C-` issuer and an unexpired `issexp` (and exp). */
export function assertChainIssuerNotExpired(claims: { iss?: string; issexp?: number; exp?: number }, now: Date): void {
  if (claims.iss === undefined || !claims.iss.startsWith("C-")) {
    throw new JwtError("token is expired: a trust chain signature requires a chain issuer (C-)");
  }
  if (claims.issexp === undefined) {
    throw new JwtError("token is expired: a trust chain signature requires an issuer expiry (issexp)");
  }
  const expiry = claims.exp === undefined ? claims.issexp : Math.min(claims.issexp, claims.exp);
  if (now.getTime() > expiry * 1000) {
    throw new JwtError("token is expired: the chain issuer has expired");
  }
}

/** When a provisioning token stops being accepted, and its issuer; none when it has no `exp` and no chain issuer expiry. */
export function provisioningJwtExpiry(claims: { iss?: string; tcs?: string; issexp?: number; exp?: number }): ProvisioningJwtExpiry | undefined {
  const ends = [claims.exp, claims.tcs === undefined ? undefined : claims.issexp].filter((at): at is number => at !== undefined);
  if (ends.length === 0) return undefined;
  return { issuer: claims.iss ?? "", expiresAt: Math.min(...ends) * 1000 };
}

/**
 * The claims as the Go provisioner hands them to the helper (`jwt` on stdin): Go field order, Go's
 * omitempty rules, `ou` defaulted. Contains `cht`/`chpwd`: never log it.
 */
export function helperJwtClaims(claims: ProvisioningClaims): Record<string, unknown> {
  const out: Record<string, unknown> = { cht: claims.cht, chs: claims.chs };
  const optional = (name: keyof ProvisioningClaims) => {
    const value = claims[name];
    if (value !== undefined && value !== "" && value !== false) out[name] = value;
  };
  optional("chu");
  optional("chsrv");
  out.chpd = claims.chpd;
  for (const name of ["chrd", "chf", "chusr", "chpwd"] as const) optional(name);
  out.extensions = claims.extensions;
  for (const name of ["ou", "v2", "update"] as const) optional(name);
  out.purpose = claims.purpose ?? "";
  for (const name of ["tcs", "public_key", "issexp", "iss", "sub", "aud", "exp", "nbf", "iat", "jti"] as const) optional(name);
  return out;
}
