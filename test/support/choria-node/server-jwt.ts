/**
 * The other ends of a server JWT: the org issuer minting the tokens a provisioner and its nodes hold,
 * and a broker or server verifying a server JWT through its trust chain (tokens `ParseServerToken`).
 * The provisioner's side is lib/crypto/server-jwt.ts.
 */
import { randomBytes, sign, verify } from "node:crypto";
import { decodeHex, encodeHex } from "../../../lib/crypto/encoding";
import { ksuid } from "../../../lib/crypto/ids";
import { decodeJwt, signJwt } from "../../../lib/crypto/jwt";
import { verifyJwtSignature } from "./jwt-signature";
import { assertChainIssuerNotExpired, checkRegisteredTimes, type ProvisioningClaims } from "../../../lib/crypto/jwt-claims";
import { ED25519_PUBLIC_KEY_BYTES, ed25519PublicKeyFromRaw, type SigningKey } from "../../../lib/crypto/keys";
import type { ServerClaims } from "../../../lib/crypto/server-jwt";
import { JwtError } from "../../../lib/errors";
import { ksuidTime } from "./ksuid";

const ORG_ISSUER_PREFIX = "I-";
const CHAIN_ISSUER_PREFIX = "C-";

function stringClaim(claims: Record<string, unknown>, name: string): string | undefined {
  const value = claims[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function numberClaim(claims: Record<string, unknown>, name: string): number | undefined {
  const value = claims[name];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
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
