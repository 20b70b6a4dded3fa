/**
 * A node's (or a test's) check of a JWT's signature, written apart from lib/crypto's signing so that
 * each checks the other. Claims such as exp are not checked.
 */
import { createPublicKey, KeyObject, verify, X509Certificate } from "node:crypto";
import { decodeHex } from "../../../lib/crypto/encoding";
import { decodeJwt } from "../../../lib/crypto/jwt";
import { ed25519PublicKeyFromRaw } from "../../../lib/crypto/keys";

const RSA_DIGEST: Record<string, string> = { RS256: "sha256", RS384: "sha384", RS512: "sha512" };

/** `key` as a public KeyObject: a KeyObject (public or private), a PEM (certificate or key) or an Ed25519 public key's hex. */
function publicKeyFrom(key: KeyObject | string): KeyObject {
  if (key instanceof KeyObject) return key.type === "private" ? createPublicKey(key) : key;
  if (key.includes("-----BEGIN CERTIFICATE")) return new X509Certificate(key).publicKey;
  if (key.includes("-----BEGIN")) return createPublicKey(key);
  return ed25519PublicKeyFromRaw(decodeHex(key));
}

/** The claims of `token` when `publicKey` verifies its signature (EdDSA or RS256/384/512); throws otherwise. */
export function verifyJwtSignature(token: string, publicKey: KeyObject | string): Record<string, unknown> {
  const decoded = decodeJwt(token);
  const alg = String(decoded.header.alg);
  const input = Buffer.from(decoded.signingInput, "ascii");
  const digest = alg === "EdDSA" ? null : RSA_DIGEST[alg];
  if (digest === undefined) throw new Error(`unexpected JWT alg ${alg}`);
  if (!verify(digest, input, publicKeyFrom(publicKey), decoded.signature)) throw new Error("token signature is invalid");
  return decoded.claims;
}
