import { createPublicKey, KeyObject, sign, verify, X509Certificate } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { JwtError } from "../errors";
import { decodeBase64Url, decodeHex, encodeBase64Url } from "./encoding";
import { ED25519_PUBLIC_KEY_BYTES, ed25519PublicKeyFromRaw, type SigningKey } from "./keys";

/** The only algorithms Choria accepts; HMAC tokens (HS*) must never verify. */
const ALLOWED_JWT_ALGS = ["RS256", "RS384", "RS512", "EdDSA"] as const;
type JwtAlg = (typeof ALLOWED_JWT_ALGS)[number];

const RSA_DIGEST: Record<Exclude<JwtAlg, "EdDSA">, string> = { RS256: "sha256", RS384: "sha384", RS512: "sha512" };

export interface DecodedJwt {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  signingInput: string;
  signature: Uint8Array;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Splits and decodes a compact JWS without checking anything but its shape, as golang-jwt's
 * ParseUnverified does: exactly three segments, each decoded with CR/LF skipped (a token file's
 * trailing newline is fine); the signing input stays the header and claims exactly as given.
 */
export function decodeJwt(token: string): DecodedJwt {
  const parts = token.split(".");
  if (parts.length !== 3) {
    throw new JwtError("token is malformed: token contains an invalid number of segments");
  }
  const [headerPart, claimsPart, signaturePart] = parts as [string, string, string];
  let header: unknown;
  let claims: unknown;
  let signature: Uint8Array;
  try {
    header = JSON.parse(Buffer.from(decodeBase64Url(headerPart)).toString("utf8"));
    claims = JSON.parse(Buffer.from(decodeBase64Url(claimsPart)).toString("utf8"));
    signature = decodeBase64Url(signaturePart);
  } catch (cause) {
    throw new JwtError("token is malformed: could not decode its segments", { cause });
  }
  if (!isPlainObject(header) || !isPlainObject(claims)) {
    throw new JwtError("token is malformed: header and claims must be JSON objects");
  }
  return { header, claims, signingInput: `${headerPart}.${claimsPart}`, signature };
}

/** Signs `claims` (serialised in their insertion order) with header `{"alg","typ":"JWT"}`. */
export async function signJwt(claims: object, key: SigningKey): Promise<string> {
  const header = encodeBase64Url(JSON.stringify({ alg: key.alg, typ: "JWT" }));
  const payload = encodeBase64Url(JSON.stringify(claims));
  const signingInput = `${header}.${payload}`;
  const digest = key.alg === "RS256" ? "sha256" : null;
  const signature = sign(digest, Buffer.from(signingInput, "ascii"), key.privateKey);
  return `${signingInput}.${encodeBase64Url(signature)}`;
}

function algOf(header: Record<string, unknown>): JwtAlg {
  const alg = header.alg;
  if (typeof alg !== "string" || !(ALLOWED_JWT_ALGS as readonly string[]).includes(alg)) {
    throw new JwtError(`token signature is invalid: signing method ${String(alg)} is invalid`);
  }
  return alg as JwtAlg;
}

/** Checks the JWS signature of an already decoded token against `publicKey`, enforcing the key type. */
function verifyDecodedSignature(decoded: DecodedJwt, publicKey: KeyObject): JwtAlg {
  const alg = algOf(decoded.header);
  const input = Buffer.from(decoded.signingInput, "ascii");
  let valid: boolean;
  if (alg === "EdDSA") {
    if (publicKey.asymmetricKeyType !== "ed25519") {
      throw new JwtError("ed25519 public key required");
    }
    valid = verify(null, input, publicKey, decoded.signature);
  } else {
    if (publicKey.asymmetricKeyType !== "rsa") {
      throw new JwtError("rsa public key required");
    }
    valid = verify(RSA_DIGEST[alg], input, publicKey, decoded.signature);
  }
  if (!valid) {
    throw new JwtError("token signature is invalid");
  }
  return alg;
}

function publicKeyFrom(key: KeyObject | string): KeyObject {
  if (key instanceof KeyObject) {
    return key.type === "private" ? createPublicKey(key) : key;
  }
  if (key.includes("-----BEGIN CERTIFICATE")) {
    return new X509Certificate(key).publicKey;
  }
  if (key.includes("-----BEGIN")) {
    return createPublicKey(key);
  }
  return ed25519PublicKeyFromRaw(decodeHex(key));
}

/**
 * Verifies only the JWS signature (alg must be RS256/384/512 or EdDSA and match the key type) and
 * returns the claims. `publicKey` is a KeyObject, a PEM (certificate / public / private key) or the
 * hex of an Ed25519 public key. Claims such as exp are NOT checked.
 */
export function verifyJwtSignature(token: string, publicKey: KeyObject | string): Record<string, unknown> {
  const decoded = decodeJwt(token);
  verifyDecodedSignature(decoded, publicKeyFrom(publicKey));
  return decoded.claims;
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

/** How provisioning JWTs are verified: `jwt_verify_cert` resolved to a key. */
export type JwtVerifier = { kind: "rsa"; publicKey: KeyObject } | { kind: "ed25519"; publicKey: KeyObject };

const CERTIFICATE_HEADER = "-----BEGIN CERTIFICATE";
const PUBLIC_KEY_HEADER = "-----BEGIN PUBLIC KEY";

function ed25519Verifier(hex: string, what: string): JwtVerifier {
  let raw: Uint8Array;
  try {
    raw = decodeHex(hex);
  } catch (cause) {
    throw new JwtError(`could not parse ed25519 public data in ${what}: ${(cause as Error).message}`, { cause });
  }
  if (raw.length !== ED25519_PUBLIC_KEY_BYTES) {
    throw new JwtError(`invalid ed25519 public key size in ${what}`);
  }
  return { kind: "ed25519", publicKey: ed25519PublicKeyFromRaw(raw) };
}

/**
 * Resolves `jwt_verify_cert` like the Go provisioner: a value that is not an existing path is the
 * hex of an Ed25519 public key; a file starting with a CERTIFICATE or PUBLIC KEY PEM header is an
 * RSA certificate / PKIX key; any other file content is hex Ed25519 as is (a trailing newline fails).
 */
export async function loadJwtVerifier(jwtVerifyCert: string): Promise<JwtVerifier> {
  if (jwtVerifyCert === "") {
    throw new JwtError("no JWT verification certificate configured, cannot validate JWT");
  }
  try {
    await stat(jwtVerifyCert);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return ed25519Verifier(jwtVerifyCert, "jwt_verify_cert");
    }
  }
  let content: Buffer;
  try {
    content = await readFile(jwtVerifyCert);
  } catch (cause) {
    throw new JwtError(`could not read validation certificate ${jwtVerifyCert}`, { cause });
  }
  return jwtVerifierFromContent(content, jwtVerifyCert);
}

/** The verifier of `jwt_verify_cert` file content (or the same content fetched from a secret store). */
export function jwtVerifierFromContent(content: Buffer, source: string): JwtVerifier {
  const jwtVerifyCert = source;
  const head = content.subarray(0, CERTIFICATE_HEADER.length).toString("latin1");
  if (head.startsWith(CERTIFICATE_HEADER) || head.startsWith(PUBLIC_KEY_HEADER)) {
    let publicKey: KeyObject;
    try {
      publicKey = head.startsWith(CERTIFICATE_HEADER)
        ? new X509Certificate(content).publicKey
        : createPublicKey({ key: content, format: "pem" });
    } catch (cause) {
      throw new JwtError(`could not parse validation certificate ${jwtVerifyCert}`, { cause });
    }
    if (publicKey.asymmetricKeyType !== "rsa") {
      throw new JwtError(`could not parse validation certificate ${jwtVerifyCert}: key is not a valid RSA public key`);
    }
    return { kind: "rsa", publicKey };
  }
  return ed25519Verifier(content.toString("latin1"), jwtVerifyCert);
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
function typedProvisioningClaims(raw: Record<string, unknown>): ProvisioningClaims {
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

/**
 * Verifies a node's provisioning JWT (docs/protocol.md §9.1): allowed algorithm matching the verifier's
 * key type, signature, exp/nbf without leeway, provisioning purpose, and for tokens carrying a trust
 * chain signature a `C-` issuer whose `issexp` has not passed. Reasons never include the token.
 */
export async function verifyProvisioningJwt(token: string, verifier: JwtVerifier, now: Date = new Date()): Promise<ProvisioningClaims> {
  try {
    const decoded = decodeJwt(token);
    verifyDecodedSignature(decoded, verifier.publicKey);
    const claims = typedProvisioningClaims(decoded.claims);
    checkRegisteredTimes(decoded.claims, now);
    if (claims.sub !== "choria_provisioning" && claims.purpose !== "choria_provisioning") {
      throw new JwtError("not a provisioning token");
    }
    if (claims.tcs !== undefined) {
      assertChainIssuerNotExpired(claims, now);
    }
    return claims;
  } catch (error) {
    if (error instanceof JwtError && error.message === "not a provisioning token") throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new JwtError(`could not parse provisioner token: ${reason}`, { cause: error });
  }
}

/** Every `alg` golang-jwt v5 registers: ParseUnverified refuses any other before anything is verified. */
const GO_REGISTERED_ALGS = new Set([
  "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "none",
]);

/**
 * Reads a provisioning JWT without verifying it, as a node reads its own `provisioning.jwt` (tokens
 * `ParseProvisionTokenUnverified`): three decodable segments, a registered `alg`, claims of the right
 * types, and `sub` or `purpose` "choria_provisioning". Expiry and signature are NOT checked.
 */
export function parseProvisioningJwtUnverified(token: string): ProvisioningClaims {
  const decoded = decodeJwt(token);
  const alg = decoded.header.alg;
  if (typeof alg !== "string") throw new JwtError("token is unverifiable: signing method (alg) is unspecified");
  if (!GO_REGISTERED_ALGS.has(alg)) throw new JwtError("token is unverifiable: signing method (alg) is unavailable");
  const claims = typedProvisioningClaims(decoded.claims);
  if (claims.sub !== "choria_provisioning" && claims.purpose !== "choria_provisioning") {
    throw new JwtError("token is not a provisioning token");
  }
  return claims;
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
