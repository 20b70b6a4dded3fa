import { createPublicKey, KeyObject, sign, verify, X509Certificate } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { JwtError } from "../errors";
import { decodeBase64Url, decodeHex, encodeBase64Url } from "./encoding";
import type { ProvisioningJwtExpiry } from "../ports/credentials";
import { assertChainIssuerNotExpired, checkRegisteredTimes, isPlainObject, provisioningJwtExpiry, type ProvisioningClaims, typedProvisioningClaims } from "./jwt-claims";
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

/**
 * Verifies a node's provisioning JWT (docs/protocol.md §9.1): allowed algorithm matching the verifier's
 * key type, signature, exp/nbf without leeway, provisioning purpose, and for tokens carrying a trust
 * chain signature a `C-` issuer whose `issexp` has not passed. Reasons never include the token.
 */
export async function verifyProvisioningJwt(token: string, verifier: JwtVerifier, now: Date = new Date()): Promise<ProvisioningClaims> {
  let signed: ProvisioningClaims | undefined;
  try {
    const decoded = decodeJwt(token);
    verifyDecodedSignature(decoded, verifier.publicKey);
    const claims = typedProvisioningClaims(decoded.claims);
    signed = claims;
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
    const message = `could not parse provisioner token: ${reason}`;
    const expired = signed && expiredProvisioningJwt(signed, now);
    throw expired ? new ProvisioningJwtExpiredError(message, expired, { cause: error }) : new JwtError(message, { cause: error });
  }
}

/** The expiry of a token signed by the verifier's key, for provisioning, whose expiry has passed; else none. */
function expiredProvisioningJwt(claims: ProvisioningClaims, now: Date): ProvisioningJwtExpiry | undefined {
  if (claims.sub !== "choria_provisioning" && claims.purpose !== "choria_provisioning") return undefined;
  const expiry = provisioningJwtExpiry(claims);
  return expiry && expiry.expiresAt <= now.getTime() ? expiry : undefined;
}

/**
 * A provisioning token that is authentic (signed by the verifier's key, for provisioning) but
 * expired: the node's image carries a bootstrap credential that no longer enrols it. `expiry` says
 * whose and since when, so the registry can count such nodes (docs/audit.md).
 */
export class ProvisioningJwtExpiredError extends JwtError {
  constructor(
    message: string,
    readonly expiry: ProvisioningJwtExpiry,
    options: { cause?: unknown },
  ) {
    super(message, options);
  }
}
