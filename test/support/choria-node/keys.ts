/**
 * Keys for simulated nodes, org issuers and test provisioners: a fresh Ed25519 seed, and signing keys
 * made the one way the provisioner makes them, from `jwt_signing_key` content (loadSigningKey).
 */
import { KeyObject, randomBytes } from "node:crypto";
import { encodeHex } from "../../../lib/crypto/encoding";
import { loadSigningKey, type SigningKey } from "../../../lib/crypto/keys";

const ED25519_SEED_BYTES = 32;

export function generateEd25519Seed(): Uint8Array {
  return new Uint8Array(randomBytes(ED25519_SEED_BYTES));
}

/** The EdDSA key of a 32-byte seed, as the provisioner reads a hex seed file. */
export function ed25519SigningKey(seed: Uint8Array): SigningKey {
  return loadSigningKey(encodeHex(seed), "an ed25519 test seed");
}

/** The RS256 key of an RSA private key, as the provisioner reads its PEM; throws JwtError for any other key. */
export function rsaSigningKey(privateKey: KeyObject): SigningKey {
  return loadSigningKey(privateKey.export({ format: "pem", type: "pkcs8" }), "an RSA test key");
}
