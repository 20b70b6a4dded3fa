/**
 * Turns the provisioner configuration into the Choria client settings (sender, caller, signer)
 * and the broker connection settings. Key and certificate files are read once per container.
 */
import { createPrivateKey, sign } from "node:crypto";
import { readFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import type { BrokerConnectionSettings } from "../nats/connection-options";
import type { RequestSigner } from "../choria/protocol";
import type { ChoriaClientSettings } from "../nats/rpc-client";
import { parseSecretReference } from "../config/secrets";
import type { ProvisionerConfig } from "../config/types";
import { decodeHex } from "../crypto/encoding";
import { decodeJwt, jwtVerifierFromContent, loadJwtVerifier, type JwtVerifier } from "../crypto/jwt";
import { ed25519PrivateKeyFromSeed, loadSigningKey, type SigningKey } from "../crypto/keys";
import { ConfigError } from "../errors";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";

export async function choriaClientSettings(config: ProvisionerConfig, clock: Clock, logger: Logger): Promise<ChoriaClientSettings> {
  const base = { senderId: config.identity, ttl: config.rpcTtl, clock, logger };
  if (config.protocolVersion === 2) {
    const jwt = config.clientJwt as string;
    let callerId: unknown;
    try {
      callerId = decodeJwt(jwt).claims.callerid;
    } catch (error) {
      throw new ConfigError("client_jwt", "is not a JWT", { cause: error });
    }
    if (typeof callerId !== "string" || callerId === "") throw new ConfigError("client_jwt", "has no callerid claim");
    // parseConfig checked the seed's format; a reference left unresolved is refused by name.
    const key = ed25519PrivateKeyFromSeed(decodeHex(unresolvedCheck("client_seed", config.clientSeed as string).trim()));
    const signer: RequestSigner = { version: 2, callerJwt: jwt, sign: (bytes) => new Uint8Array(sign(null, bytes, key)) };
    return { ...base, callerId, protocolVersion: 2, signer };
  }
  return { ...base, callerId: config.callerid, protocolVersion: 1, signer: await v1Signer(config) };
}

/** Provisioning-mode servers never verify v1 signatures, but a TLS deployment signs as Go does. */
async function v1Signer(config: ProvisionerConfig): Promise<RequestSigner> {
  if (config.choriaInsecure || !config.tls.cert || !config.tls.key) return { version: 1, kind: "insecure" };
  const pubcert = await keyMaterial("tls.cert", config.tls.cert);
  const key = createPrivateKey(await keyMaterial("tls.key", config.tls.key));
  return { version: 1, kind: "x509", pubcert, sign: (message) => new Uint8Array(sign("sha256", message, key)) };
}

/** The client JWT's key signs the broker's nonce, as `choriaClientSettings` signs requests with it. */
function nonceSigner(clientSeed: string): (nonce: Uint8Array) => Uint8Array {
  const key = ed25519PrivateKeyFromSeed(decodeHex(unresolvedCheck("client_seed", clientSeed).trim()));
  return (nonce) => new Uint8Array(sign(null, nonce, key));
}

/** Broker URLs as nats.js takes them: nats://; tls:// only says the listener is TLS, which `insecure` covers. */
export function natsServers(urls: readonly string[]): string[] {
  return urls.map((url) => url.replace(/^tls:\/\//, "nats://"));
}

export async function brokerSettings(config: ProvisionerConfig, name: string): Promise<BrokerConnectionSettings> {
  const tls = config.choriaInsecure
    ? undefined
    : {
        ca: config.tls.ca ? await keyMaterial("tls.ca", config.tls.ca) : undefined,
        cert: config.tls.cert ? await keyMaterial("tls.cert", config.tls.cert) : undefined,
        key: config.tls.key ? await keyMaterial("tls.key", config.tls.key) : undefined,
        insecureSkipVerify: config.tls.insecureSkipVerify,
      };
  return {
    servers: natsServers(config.brokerUrls),
    provisioningPassword: config.brokerProvisioningPassword,
    token: config.natsToken ?? (config.protocolVersion === 2 ? config.clientJwt : undefined),
    ...(config.natsToken === undefined && config.protocolVersion === 2 && config.clientSeed !== undefined ? { signNonce: nonceSigner(config.clientSeed) } : {}),
    tls,
    insecure: config.choriaInsecure,
    name,
  };
}

export interface EngineKeys {
  jwtVerifier?: JwtVerifier;
  signingKey?: SigningKey;
  /** The content of `jwt_signing_token` (the provisioner's client JWT). Never log it. */
  signingToken?: string;
}

/** A compact JWS whose header is JSON (`{"` encodes as `eyJ`): a token, not a file name. */
const COMPACT_JWT = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+[\r\n]*$/;

/** Loads `jwt_verify_cert`, `jwt_signing_key` and `jwt_signing_token` when the enabled features need them. */
export async function loadEngineKeys(config: ProvisionerConfig): Promise<EngineKeys> {
  const keys: EngineKeys = {};
  if (config.features.jwt && config.jwtVerifyCert) {
    const value = unresolvedCheck("jwt_verify_cert", config.jwtVerifyCert);
    // PEM from a secret store is the certificate itself; anything else is Go's path-or-hex-key rule.
    keys.jwtVerifier = isPem(value)
      ? jwtVerifierFromContent(Buffer.from(value, "utf8"), "jwt_verify_cert")
      : await loadJwtVerifier(/^[0-9a-fA-F]{64}$/.test(value) ? value : shippedPath(value));
  }
  if (config.features.ed25519 && config.jwtSigningKey) {
    const value = unresolvedCheck("jwt_signing_key", config.jwtSigningKey);
    // A value from a secret store is the key itself; otherwise, as in Go, it names a file.
    const material = isPem(value) || /^[0-9a-fA-F]{64}\s*$/.test(value) ? value : await readText("jwt_signing_key", value);
    keys.signingKey = loadSigningKey(material, material === value ? "jwt_signing_key" : value);
  }
  if (config.features.ed25519 && config.jwtSigningToken) {
    const value = unresolvedCheck("jwt_signing_token", config.jwtSigningToken);
    // As in Go, a file path read as is; a value from a secret store is the token itself.
    keys.signingToken = COMPACT_JWT.test(value) ? value : await readText("jwt_signing_token", value);
  }
  return keys;
}

/**
 * The PEM of a key or certificate setting: the value itself when it came from a secret store
 * (`ssm:` / `secretsmanager:`), else the file it names. A relative path is a file shipped in the
 * function's bundle (docs/deploy.md, `config/files/`), resolved against LAMBDA_TASK_ROOT on Lambda.
 */
async function keyMaterial(setting: string, value: string): Promise<string> {
  unresolvedCheck(setting, value);
  return isPem(value) ? value : readText(setting, value);
}

const isPem = (value: string) => value.trimStart().startsWith("-----BEGIN ");

/** A reference left unresolved means the function's FUNCTION_SETTINGS entry does not list the setting. */
function unresolvedCheck(setting: string, value: string): string {
  if (parseSecretReference(value)) {
    throw new ConfigError(setting, `${value} is not resolved for this function (lib/config/secrets.ts FUNCTION_SETTINGS)`);
  }
  return value;
}

function shippedPath(path: string): string {
  const root = process.env.LAMBDA_TASK_ROOT;
  return root && !isAbsolute(path) ? join(root, path) : path;
}

async function readText(key: string, path: string): Promise<string> {
  try {
    return await readFile(shippedPath(path), "utf8");
  } catch (error) {
    throw new ConfigError(key, `file ${path} could not be read`, { cause: error });
  }
}

export function warnInsecureSigner(config: ProvisionerConfig, logger: Logger): void {
  if (config.protocolVersion === 1 && !config.choriaInsecure && (!config.tls.cert || !config.tls.key)) {
    logger.warn("no tls.cert / tls.key configured: v1 requests are sent with the insecure signature filler");
  }
}
