/**
 * What the issuance ledger records of the credentials a node is about to be sent
 * (lib/ports/issuance-ledger.ts): the certificate's serial, fingerprint, issuer and key, the server
 * JWT's `jti`, `exp`, issuer and key, and a digest of the helper's verdict. Nothing secret goes in:
 * not the token, not the private key the helper may return, not the value of any configuration
 * setting whose name marks it a secret, and not the helper's free-text message; a digest of a
 * low-entropy secret could be guessed back, so those are left out before hashing, not hashed.
 */
import { createHash } from "node:crypto";
import { certificateIdentity } from "../crypto/certificate";
import { decodeHex } from "../crypto/encoding";
import { messageOf } from "../errors";
import { isSecretAttributeName, REDACTED } from "../observability/redact";
import type { HelperResponse } from "../ports/helper";
import type { IssuedCertificate, IssuedCredentials, IssuedServerJwt } from "../ports/issuance-ledger";
import type { ServerJwt } from "./credentials";
import type { HostRun } from "./host-run";

/**
 * The ledger's record of what is about to be sent, or undefined when nothing expiring is (no server
 * JWT, and no certificate or one that cannot be read: the node's to reject, and the log says so).
 */
export function issuedCredentials(run: HostRun, serverJwt: ServerJwt, response: HelperResponse): IssuedCredentials | undefined {
  const certificate = readCertificate(run, response.certificate);
  const jwt = jwtRecord(serverJwt);
  const credentialId = jwt?.jti ?? certificate?.sha256;
  if (credentialId === undefined) return undefined;
  return {
    credentialId,
    issuedAt: Math.floor(run.clock.now()),
    ...(certificate ? { certificate } : {}),
    ...(jwt ? { serverJwt: jwt } : {}),
    verdictSha256: verdictDigest(response),
  };
}

function readCertificate(run: HostRun, pem: string): IssuedCertificate | undefined {
  if (pem === "") return undefined;
  try {
    return certificateIdentity(pem);
  } catch (error) {
    run.logger.warn("the helper's certificate could not be read; its expiry is not recorded", { ...run.log, error: messageOf(error) });
    return undefined;
  }
}

function jwtRecord({ jti, expiresAt, issuer, publicKeyHex }: ServerJwt): IssuedServerJwt | undefined {
  if (jti === undefined || expiresAt === undefined || issuer === undefined || publicKeyHex === undefined) return undefined;
  return { jti, expiresAt, issuer, keySha256: createHash("sha256").update(decodeHex(publicKeyHex)).digest("hex") };
}

/**
 * SHA-256 (hex) of the verdict's public parts as sorted JSON: whether it deferred or shut down, the
 * certificate and CA, the ssl directory, the server claims, the policies, the upgrade and the
 * configuration with every secret-named setting's value replaced by a marker (its name stays: the
 * digest changes when a secret is added or removed, not when its value does). Left out: `key` and `msg`.
 */
function verdictDigest(response: HelperResponse): string {
  const configuration = Object.fromEntries(Object.entries(response.configuration).map(([name, value]) => [name, isSecretAttributeName(name) ? REDACTED : value]));
  const verdict = {
    defer: response.defer,
    shutdown: response.shutdown,
    certificate: response.certificate,
    ca: response.ca,
    ssldir: response.ssldir,
    server_claims: response.server_claims,
    action_policies: response.action_policies,
    opa_policies: response.opa_policies,
    upgrade: response.upgrade,
    configuration,
  };
  return createHash("sha256").update(sortedJson(verdict)).digest("hex");
}

/** JSON with every object's keys sorted, so equal verdicts digest alike whatever order the helper wrote them in. */
function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, field]) => field !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, field]) => `${JSON.stringify(name)}:${sortedJson(field)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}
