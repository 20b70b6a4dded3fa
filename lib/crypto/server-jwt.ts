import { randomBytes, sign, verify } from "node:crypto";
import { JwtError } from "../errors";
import type { ServerClaimsOverride } from "../ports";
import { decodeHex, encodeHex } from "./encoding";
import { ksuid, ksuidTime } from "./ids";
import { assertChainIssuerNotExpired, checkRegisteredTimes, decodeJwt, signJwt, type ProvisioningClaims, verifyJwtSignature } from "./jwt";
import { ED25519_PUBLIC_KEY_BYTES, ed25519PublicKeyFromRaw, type SigningKey } from "./keys";

const SERVER_JWT_ISSUER = "Choria Provisioner";
const ORG_ISSUER_PREFIX = "I-";
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

function ed25519Key(hex: string, what: string) {
  let raw: Uint8Array;
  try {
    raw = decodeHex(hex);
  } catch (cause) {
    throw new JwtError(`invalid ${what}: not hex encoded`, { cause });
  }
  if (raw.length !== ED25519_PUBLIC_KEY_BYTES) throw new JwtError(`invalid ${what}: invalid public key size`);
  return ed25519PublicKeyFromRaw(raw);
}

function hexSignature(hex: string, what: string): Uint8Array {
  try {
    return decodeHex(hex);
  } catch (cause) {
    throw new JwtError(`invalid ${what} encoding`, { cause });
  }
}

/** The chain checks of tokens `IsSignedByIssuer` for a `C-` token; returns the chain issuer's key. */
function chainSignerKey(claims: Record<string, unknown>, orgPublicKeyHex: string) {
  const iss = stringClaim(claims, "iss");
  const jti = stringClaim(claims, "jti");
  const tcs = stringClaim(claims, "tcs");
  const iat = numberClaim(claims, "iat");
  if (iss === undefined) throw new JwtError("no issuer set");
  if (stringClaim(claims, "public_key") === undefined) throw new JwtError("no public key set");
  if (tcs === undefined) throw new JwtError("no trust chain signature set");
  if (jti === undefined) throw new JwtError("id not set");
  if (iat === undefined || iat === 0) throw new JwtError("no issued time set");
  if (!numberClaim(claims, "exp")) throw new JwtError("no expires set");
  let jtiTime: Date;
  try {
    jtiTime = ksuidTime(jti);
  } catch (cause) {
    throw new JwtError("invalid ksuid format", { cause });
  }
  if (jtiTime.getTime() !== Math.floor(iat) * 1000 || !Number.isInteger(iat)) throw new JwtError("id is not based on issued time");
  if (!numberClaim(claims, "issexp")) throw new JwtError("no issuer expires set");

  const issuerParts = iss.slice(CHAIN_ISSUER_PREFIX.length).split(".");
  if (issuerParts.length !== 2) throw new JwtError("invalid issuer content");
  const [issuerId, issuerKeyHex] = issuerParts as [string, string];
  if (issuerId === "") throw new JwtError("invalid id in issuer");
  if (issuerKeyHex === "") throw new JwtError("invalid public key in issuer");
  const chainKey = ed25519Key(issuerKeyHex, "public key in issuer data");
  const tcsParts = tcs.split(".");
  if (tcsParts.length !== 2 || tcsParts.some((part) => part === "")) throw new JwtError("invalid trust chain signature");
  const [orgSignatureHex, chainSignatureHex] = tcsParts as [string, string];
  const chainSignature = hexSignature(chainSignatureHex, "signature in chain signature");
  const orgSignature = hexSignature(orgSignatureHex, "trust chain signature");

  const orgKey = ed25519Key(orgPublicKeyHex, "org issuer public key");
  const orgData = Buffer.from(`${issuerId}.${encodeHex(decodeHex(issuerKeyHex))}`, "utf8");
  if (!verify(null, orgData, orgKey, orgSignature)) throw new JwtError("chain issuer credentials not signed by org issuer");
  if (!verify(null, Buffer.from(`${jti}.${orgSignatureHex}`, "utf8"), chainKey, chainSignature)) {
    throw new JwtError("invalid chain signature");
  }
  return chainKey;
}

/**
 * Verifies a server JWT the way brokers and servers do with the org issuer public key (tokens
 * `ParseServerToken`): a `C-` issuer is checked through the trust chain and the JWS against the
 * chain issuer's key; any other issuer must have signed with the org key itself.
 */
export function verifyChainedServerJwt(token: string, orgPublicKeyHex: string, now: Date = new Date()): ServerClaims {
  try {
    const decoded = decodeJwt(token);
    if (decoded.header.alg !== "EdDSA") throw new JwtError("ed25519 public key required");
    const iss = stringClaim(decoded.claims, "iss");
    const signerKey = iss?.startsWith(CHAIN_ISSUER_PREFIX)
      ? chainSignerKey(decoded.claims, orgPublicKeyHex)
      : ed25519Key(orgPublicKeyHex, "org issuer public key");
    const claims = verifyJwtSignature(token, signerKey);
    checkRegisteredTimes(claims, now);
    if (claims.purpose !== "choria_server") throw new JwtError("not a server token");
    if (stringClaim(claims, "tcs") !== undefined) {
      assertChainIssuerNotExpired({ iss, issexp: numberClaim(claims, "issexp"), exp: numberClaim(claims, "exp") }, now);
    }
    return claims as unknown as ServerClaims;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new JwtError(`could not parse server id token: ${reason}`, { cause: error });
  }
}

const PROVISIONING_CLAIM_ORDER = [
  "cht", "chs", "chu", "chsrv", "chpd", "chrd", "chf", "chusr", "chpwd", "extensions", "ou", "v2", "update",
  "purpose", "tcs", "public_key", "issexp", "iss", "sub", "aud", "exp", "nbf", "iat", "jti",
] as const;

/** Signs a provisioning JWT (what a node's `provisioning.jwt` holds) from the given claims, in Go order. */
export async function mintProvisioningJwt(claims: Partial<ProvisioningClaims> & { cht?: string }, key: SigningKey): Promise<string> {
  const ordered: Record<string, unknown> = {};
  for (const name of PROVISIONING_CLAIM_ORDER) {
    if (claims[name] !== undefined) ordered[name] = claims[name];
  }
  return signJwt(ordered, key);
}

export interface ChainIssuerTokenInput {
  /** The org issuer's Ed25519 key; the token is signed with it and `iss` = "I-" + its public key. */
  orgIssuer: SigningKey;
  /** Hex Ed25519 public key of the chain issuer (the provisioner's `jwt_signing_key` seed). */
  chainPublicKeyHex: string;
  callerid?: string;
  ou?: string;
  permissions?: Record<string, boolean>;
  now?: Date;
  /** Absolute expiry (NumericDate seconds). */
  exp: number;
  jtiRandom?: Uint8Array;
}

/**
 * Mints a `choria_client_id` token issued by an org issuer to a chain issuer (e.g. the
 * provisioner's `jwt_signing_token`): `tcs` = hex(Ed25519_org("<jti>.<public_key>")).
 */
export async function mintChainIssuerToken(input: ChainIssuerTokenInput): Promise<string> {
  if (input.orgIssuer.alg !== "EdDSA") throw new JwtError("the org issuer key must be ed25519");
  const iat = Math.floor((input.now ?? new Date()).getTime() / 1000);
  const jti = ksuid(new Date(iat * 1000), input.jtiRandom ?? randomBytes(16));
  const publicKey = input.chainPublicKeyHex.toLowerCase();
  const tcs = encodeHex(sign(null, Buffer.from(`${jti}.${publicKey}`, "utf8"), input.orgIssuer.privateKey));
  return signJwt(
    {
      callerid: input.callerid ?? "choria=provisioner_signer",
      ou: input.ou ?? "choria",
      permissions: input.permissions ?? { provisioner: true },
      purpose: "choria_client_id",
      tcs,
      public_key: publicKey,
      iss: `${ORG_ISSUER_PREFIX}${input.orgIssuer.publicKeyHex}`,
      exp: input.exp,
      nbf: iat,
      iat,
      jti,
    },
    input.orgIssuer,
  );
}
