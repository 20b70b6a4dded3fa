/** The credentials a node is given: its server JWT signed, its private key encrypted for transport, and what is recorded of them (the ledger's record, their expiry for renewal). */
import { addChainIssuerData, buildServerClaims, serverJwtSettings } from "../crypto/server-jwt";
import { decodeHex, encodeHex } from "../crypto/encoding";
import { encryptLegacyPem } from "../crypto/legacy-pem";
import { generateX25519KeyPair, x25519SharedSecret } from "../crypto/ecdh";
import { signJwt } from "../crypto/jwt";
import { ConfigError, messageOf } from "../errors";
import type { HelperResponse } from "../ports/helper";
import type { CredentialsExpiry } from "../ports/credentials";
import type { IssuedCredentials } from "../ports/issuance-ledger";
import { CredentialsNotRecordedError, KeyTransportError, ServerJwtError } from "./errors";
import type { HostRun } from "./host-run";
import type { Ed25519Key } from "./node-facts";
import type { ProvisionOptions } from "./settings";

export interface ServerJwt {
  jwt: string;
  /** Epoch ms the signed server JWT expires (its `exp`). */
  expiresAt?: number;
  /** Its `jti` and `iss`, and the node's ed25519 public key (hex) it binds: what the issuance ledger records. */
  jti?: string;
  issuer?: string;
  publicKeyHex?: string;
}

export interface TransportedKey {
  encrypted: string;
  ecdhPublic: string;
}

export async function signServerJwt(run: HostRun, ed25519Key: Ed25519Key | null, response: HelperResponse): Promise<Required<ServerJwt>> {
  const { settings } = run;
  const publicKeyHex = ed25519Key?.public_key ?? "";
  if (publicKeyHex === "") throw new ServerJwtError("no ed25519 public key set");
  const signingKey = settings.signingKey;
  if (!signingKey) throw new ConfigError("jwt_signing_key", "no jwt signing key configured");
  if (!(settings.serverJwtValidityMs > 0)) throw new ConfigError("server_jwt_validity", "no default validity configured");

  const now = new Date(run.clock.now());
  const jwtSettings = serverJwtSettings(response.configuration, response.server_claims, settings.serverJwtValidityMs, now);
  let claims = buildServerClaims({
    identity: run.identity,
    publicKeyHex,
    org: jwtSettings.org,
    collectives: jwtSettings.collectives,
    validityMs: jwtSettings.validityMs,
    permissions: jwtSettings.permissions,
    pubSubjects: jwtSettings.pubSubjects,
    now,
  });
  if (settings.signingToken) {
    claims = addChainIssuerData(claims, settings.signingToken, signingKey);
  }
  const expiresAt = claims.exp * 1000;
  return { jwt: await signJwt(claims, signingKey), expiresAt, jti: claims.jti, issuer: claims.iss, publicKeyHex };
}

export function encryptKey(run: HostRun, serverEcdhPublic: string, pem: string): TransportedKey {
  if (serverEcdhPublic === "") {
    throw new KeyTransportError("private key received from helper but server did not start Diffie-Hellman exchange");
  }
  try {
    const serverPublic = decodeHex(serverEcdhPublic);
    const own = generateX25519KeyPair();
    const shared = x25519SharedSecret(own.privateKey, serverPublic);
    return { encrypted: encryptLegacyPem(pem, shared), ecdhPublic: encodeHex(own.publicKey) };
  } catch (error) {
    throw new KeyTransportError(`could not encrypt the private key for ${run.identity}: ${messageOf(error)}`, { cause: error });
  }
}

/** Whichever of the helper's certificate and the server JWT expires first, for renewal, with the ledger's id of the credentials. */
export function credentialsExpiry(issued: IssuedCredentials): CredentialsExpiry {
  const candidates: Array<Pick<CredentialsExpiry, "expiresAt" | "kind">> = [];
  if (issued.serverJwt) candidates.push({ expiresAt: issued.serverJwt.expiresAt, kind: "server_jwt" });
  if (issued.certificate) candidates.push({ expiresAt: issued.certificate.notAfter, kind: "certificate" });
  const [first] = candidates.sort((a, b) => a.expiresAt - b.expiresAt);
  return { ...(first as (typeof candidates)[number]), issuedAt: issued.issuedAt, credentialId: issued.credentialId };
}

export async function recordCredentials(record: ProvisionOptions["recordCredentials"], credentials: CredentialsExpiry, issued: IssuedCredentials): Promise<void> {
  if (!record) return;
  try {
    await record(credentials, issued);
  } catch (error) {
    throw new CredentialsNotRecordedError(`the credentials could not be recorded before configuring: ${messageOf(error)}`, { cause: error });
  }
}
