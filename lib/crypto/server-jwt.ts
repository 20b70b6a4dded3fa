import { randomBytes, sign } from "node:crypto";
import { JwtError } from "../errors";
import type { ServerClaimsOverride } from "../ports/helper";
import { decodeHex, encodeHex } from "./encoding";
import { ksuid } from "./ids";
import { decodeJwt } from "./jwt";
import type { SigningKey } from "./keys";

const SERVER_JWT_ISSUER = "Choria Provisioner";
const CHAIN_ISSUER_PREFIX = "C-";
const ONE_HOUR_MS = 3_600_000;

interface ServerPermissions {
  submission?: boolean;
  streams?: boolean;
  governor?: boolean;
  service_host?: boolean;
}

/** Claims of a server JWT; build them with buildServerClaims so keys keep Go's order. */
export interface ServerClaims {
  identity: string;
  collectives: string[];
  permissions?: ServerPermissions;
  ou: string;
  pub_subjects?: string[];
  purpose: "choria_server";
  tcs?: string;
  public_key: string;
  issexp?: number;
  iss: string;
  exp: number;
  nbf: number;
  iat: number;
  jti: string;
}

/** Re-creates the object in tokens `ServerClaims` JSON order, dropping empty omitempty fields. */
function inGoOrder(claims: ServerClaims): ServerClaims {
  const ordered: Record<string, unknown> = { identity: claims.identity, collectives: claims.collectives };
  if (claims.permissions !== undefined) ordered.permissions = claims.permissions;
  ordered.ou = claims.ou;
  if (claims.pub_subjects !== undefined && claims.pub_subjects.length > 0) ordered.pub_subjects = claims.pub_subjects;
  ordered.purpose = claims.purpose;
  if (claims.tcs) ordered.tcs = claims.tcs;
  ordered.public_key = claims.public_key;
  if (claims.issexp !== undefined) ordered.issexp = claims.issexp;
  Object.assign(ordered, { iss: claims.iss, exp: claims.exp, nbf: claims.nbf, iat: claims.iat, jti: claims.jti });
  return ordered as unknown as ServerClaims;
}

/** Only the granted permissions are serialised (each is omitempty in Go). */
function grantedPermissions(permissions: ServerPermissions): ServerPermissions {
  const granted: ServerPermissions = {};
  for (const name of ["submission", "streams", "governor", "service_host"] as const) {
    if (permissions[name] === true) granted[name] = true;
  }
  return granted;
}

export interface ServerJwtSettings {
  org: string;
  collectives: string[];
  validityMs: number;
  permissions: ServerPermissions | undefined;
  pubSubjects: string[] | undefined;
}

/**
 * Decides org, collectives, validity, permissions and publish subjects of a node's server JWT from
 * the helper's answer (docs/behaviour.md §3 step 7). An absolute `server_claims.exp` sets validity to
 * exp − now; any validity of one hour or less falls back to the configured default.
 */
export function serverJwtSettings(
  configuration: Record<string, string>,
  serverClaims: ServerClaimsOverride | null,
  defaultValidityMs: number,
  now: Date,
): ServerJwtSettings {
  let org = "choria";
  let validityMs = defaultValidityMs;
  let collectives = ["mcollective"];
  let permissions: ServerPermissions | undefined;
  let pubSubjects: string[] | undefined;

  if (configuration["plugin.security.provider"] === "choria") {
    collectives = ["choria"];
  }
  const configured = configuration.collectives;
  if (configured !== undefined) {
    collectives = configured.split(",");
  }
  if (serverClaims) {
    if (serverClaims.ou) org = serverClaims.ou;
    if (typeof serverClaims.exp === "number") validityMs = serverClaims.exp * 1000 - now.getTime();
    if (serverClaims.collectives && serverClaims.collectives.length > 0) collectives = [...serverClaims.collectives];
    if (serverClaims.pub_subjects && serverClaims.pub_subjects.length > 0) pubSubjects = [...serverClaims.pub_subjects];
    if (serverClaims.permissions) permissions = grantedPermissions(serverClaims.permissions);
  }
  if (validityMs <= ONE_HOUR_MS) {
    validityMs = defaultValidityMs;
  }
  return { org, collectives, validityMs, permissions, pubSubjects };
}

export interface ServerClaimsInput {
  identity: string;
  /** Hex of the node's Ed25519 public key (from gen25519). */
  publicKeyHex: string;
  org?: string;
  collectives: string[];
  validityMs: number;
  permissions?: ServerPermissions;
  pubSubjects?: string[];
  now: Date;
  /** The 16 random bytes of the jti KSUID; fresh random bytes when omitted. */
  jtiRandom?: Uint8Array;
}

/**
 * Claims of a server JWT as tokens `NewServerClaims` makes them: iss "Choria Provisioner",
 * iat = nbf = now in whole seconds, exp = iat + validity (whole seconds), jti a KSUID of iat.
 */
export function buildServerClaims(input: ServerClaimsInput): ServerClaims {
  if (input.identity === "") throw new JwtError("identity is required");
  if (input.collectives.length === 0) throw new JwtError("at least one collective is required");
  if (input.publicKeyHex === "") throw new JwtError("public key is required");
  if (!(input.validityMs > 0)) throw new JwtError("validity is required");
  let publicKey: Uint8Array;
  try {
    publicKey = decodeHex(input.publicKeyHex);
  } catch (cause) {
    throw new JwtError("public key is not hex encoded", { cause });
  }
  const iat = Math.floor(input.now.getTime() / 1000);
  return inGoOrder({
    identity: input.identity,
    collectives: [...input.collectives],
    permissions: input.permissions === undefined ? undefined : grantedPermissions(input.permissions),
    ou: input.org || "choria",
    pub_subjects: input.pubSubjects,
    purpose: "choria_server",
    public_key: encodeHex(publicKey),
    iss: SERVER_JWT_ISSUER,
    exp: Math.floor((iat * 1000 + input.validityMs) / 1000),
    nbf: iat,
    iat,
    jti: ksuid(new Date(iat * 1000), input.jtiRandom ?? randomBytes(16)),
  });
}

interface ChainIssuerClaims {
  jti?: string;
  public_key?: string;
  exp?: number;
  tcs?: string;
}

function stringClaim(claims: Record<string, unknown>, name: string): string | undefined {
  const value = claims[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function numberClaim(claims: Record<string, unknown>, name: string): number | undefined {
  const value = claims[name];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * Makes `claims` part of an Organization Issuer chain (docs/protocol.md §9.4) using the provisioner's
 * own client token (`jwt_signing_token`, read unverified) and its Ed25519 seed. Sign the result
 * with the same seed.
 */
export function addChainIssuerData(claims: ServerClaims, provisionerToken: string, provisionerSeed: SigningKey): ServerClaims {
  if (provisionerSeed.alg !== "EdDSA") {
    throw new JwtError("jwt_signing_key must be an ed25519 seed when jwt_signing_token is set");
  }
  // Parsed as Go's ParseClientIDTokenUnverified reads the file: untrimmed (CR/LF decode away).
  const raw = decodeJwt(provisionerToken).claims;
  const issuer: ChainIssuerClaims = {
    jti: stringClaim(raw, "jti"),
    public_key: stringClaim(raw, "public_key"),
    exp: numberClaim(raw, "exp"),
    tcs: stringClaim(raw, "tcs"),
  };
  if (issuer.tcs === undefined) throw new JwtError("no Trust Chain Signature claim in JWT Signing Token");
  if (issuer.jti === undefined) throw new JwtError("id not set");
  if (issuer.public_key === undefined) throw new JwtError("public key not set");
  if (issuer.exp === undefined) throw new JwtError("issuer has no expiry");
  if (issuer.jti.includes(".") || issuer.public_key.includes(".")) throw new JwtError("invalid issuer data");
  if (claims.jti === "") throw new JwtError("id not set");

  const issexp = Math.floor(issuer.exp);
  const signedBytes = Buffer.from(`${claims.jti}.${issuer.tcs}`, "utf8");
  const chainSignature = sign(null, signedBytes, provisionerSeed.privateKey);
  return inGoOrder({
    ...claims,
    iss: `${CHAIN_ISSUER_PREFIX}${issuer.jti}.${issuer.public_key}`,
    issexp,
    exp: claims.exp === undefined || issexp < claims.exp ? issexp : claims.exp,
    tcs: `${issuer.tcs}.${encodeHex(chainSignature)}`,
  });
}
