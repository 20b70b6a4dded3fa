import { createPrivateKey, createPublicKey, KeyObject } from "node:crypto";
import { JwtError } from "../errors";
import { decodeHex, encodeHex } from "./encoding";

const ED25519_SEED_BYTES = 32;
export const ED25519_PUBLIC_KEY_BYTES = 32;
export const ED25519_SIGNATURE_BYTES = 64;

// DER prefixes that wrap a raw 32-byte key into PKCS#8 / SPKI for the Ed25519 (1.3.101.112) and
// X25519 (1.3.101.110) OIDs; the raw key is always the last 32 bytes of the encoding.
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
export const X25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b656e04220420", "hex");
export const X25519_SPKI_PREFIX = Buffer.from("302a300506032b656e032100", "hex");

export function ed25519PrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  if (seed.length !== ED25519_SEED_BYTES) {
    throw new RangeError(`ed25519 seed must be ${ED25519_SEED_BYTES} bytes, got ${seed.length}`);
  }
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" });
}

export function ed25519PublicKeyFromRaw(publicKey: Uint8Array): KeyObject {
  if (publicKey.length !== ED25519_PUBLIC_KEY_BYTES) {
    throw new RangeError(`ed25519 public key must be ${ED25519_PUBLIC_KEY_BYTES} bytes, got ${publicKey.length}`);
  }
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, publicKey]), format: "der", type: "spki" });
}

/** The raw 32 bytes of an Ed25519 or X25519 public key (the tail of its SPKI encoding). */
export function rawPublicKey(key: KeyObject): Uint8Array {
  const publicKey = key.type === "private" ? createPublicKey(key) : key;
  const der = publicKey.export({ format: "der", type: "spki" });
  return new Uint8Array(der.subarray(der.length - 32));
}

/** A key the provisioner signs JWTs with (`jwt_signing_key`). */
export type SigningKey =
  | { alg: "RS256"; privateKey: KeyObject; publicKey: KeyObject }
  | { alg: "EdDSA"; privateKey: KeyObject; publicKey: KeyObject; seed: Uint8Array; publicKeyHex: string };

function ed25519SigningKey(seed: Uint8Array): SigningKey {
  const privateKey = ed25519PrivateKeyFromSeed(seed);
  const publicKey = createPublicKey(privateKey);
  return { alg: "EdDSA", privateKey, publicKey, seed: new Uint8Array(seed), publicKeyHex: encodeHex(rawPublicKey(publicKey)) };
}

function rsaSigningKey(privateKey: KeyObject): SigningKey {
  if (privateKey.asymmetricKeyType !== "rsa") {
    throw new JwtError("key is not a valid RSA private key");
  }
  return { alg: "RS256", privateKey, publicKey: createPublicKey(privateKey) };
}

const RSA_PRIVATE_KEY_HEADER = "-----BEGIN RSA PRIVATE KEY";
const PRIVATE_KEY_HEADER = "-----BEGIN PRIVATE KEY";

/**
 * Reads `jwt_signing_key` content the way the Go tokens library does: an RSA PEM (PKCS#1 or PKCS#8)
 * signs RS256; content of exactly 64 bytes is a hex Ed25519 seed and signs EdDSA; nothing else is
 * accepted. `source` names the file in errors; key material never appears in them.
 */
export function loadSigningKey(content: string | Uint8Array, source: string): SigningKey {
  const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : Buffer.from(content);
  const head = bytes.subarray(0, PRIVATE_KEY_HEADER.length + 4).toString("latin1");
  if (head.startsWith(RSA_PRIVATE_KEY_HEADER) || head.startsWith(PRIVATE_KEY_HEADER)) {
    let privateKey: KeyObject;
    try {
      privateKey = createPrivateKey({ key: bytes, format: "pem" });
    } catch (cause) {
      throw new JwtError(`could not parse signing key in ${source}`, { cause });
    }
    if (privateKey.asymmetricKeyType !== "rsa") {
      throw new JwtError(`could not parse signing key in ${source}: key is not a valid RSA private key`);
    }
    return rsaSigningKey(privateKey);
  }
  if (bytes.length === 2 * ED25519_SEED_BYTES) {
    let seed: Uint8Array;
    try {
      seed = decodeHex(bytes.toString("latin1"));
    } catch (cause) {
      throw new JwtError(`invalid ed25519 seed in ${source}: not hex encoded`, { cause });
    }
    return ed25519SigningKey(seed);
  }
  throw new JwtError(`unsupported key in ${source}`);
}
