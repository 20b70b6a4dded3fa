/** The credentials a node is given: its server JWT signed, its private key encrypted for transport, and their expiry recorded for renewal. */
import { addChainIssuerData, buildServerClaims, serverJwtSettings } from "../crypto/server-jwt";
import { certificateValidity } from "../crypto/certificate";
import { decodeHex, encodeHex } from "../crypto/encoding";
import { encryptLegacyPem } from "../crypto/legacy-pem";
import { generateX25519KeyPair, x25519SharedSecret } from "../crypto/ecdh";
import { signJwt } from "../crypto/jwt";
import { ConfigError, messageOf } from "../errors";
import type { HelperResponse } from "../ports/helper";
import type { CredentialsExpiry } from "../ports/credentials";
import { CredentialsNotRecordedError, KeyTransportError, ServerJwtError } from "./errors";
import type { HostRun } from "./host-run";
import type { Ed25519Key } from "./node-facts";
import type { ProvisionOptions } from "./settings";

export interface ServerJwt {
  jwt: string;
  /** Epoch ms the signed server JWT expires (its `exp`). */
  expiresAt?: number;
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
  return { jwt: await signJwt(claims, signingKey), expiresAt };
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

/**
 * Whichever of the helper's certificate and the server JWT expires first, for renewal. A
 * certificate that cannot be read is the node's to reject, not a reason to stop here: the host
 * is then provisioned without a known certificate expiry, and the log says so.
 */
export function credentialsExpiry(run: HostRun, serverJwtExpiresAt: number | undefined, response: HelperResponse): CredentialsExpiry | undefined {
  const issuedAt = Math.floor(run.clock.now());
  const candidates: CredentialsExpiry[] = [];
  if (serverJwtExpiresAt !== undefined) candidates.push({ expiresAt: serverJwtExpiresAt, kind: "server_jwt", issuedAt });
  if (response.certificate !== "") {
    try {
      candidates.push({ expiresAt: certificateValidity(response.certificate).notAfter, kind: "certificate", issuedAt });
    } catch (error) {
      run.logger.warn("the helper's certificate could not be read; its expiry is not recorded", { ...run.log, error: messageOf(error) });
    }
  }
  return candidates.sort((a, b) => a.expiresAt - b.expiresAt)[0];
}

export async function recordCredentials(record: ProvisionOptions["recordCredentials"], credentials: CredentialsExpiry): Promise<void> {
  if (!record) return;
  try {
    await record(credentials);
  } catch (error) {
    throw new CredentialsNotRecordedError(`the credentials could not be recorded before configuring: ${messageOf(error)}`, { cause: error });
  }
}
