import { createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync } from "node:crypto";
import { EcdhError } from "../errors";
import { rawPublicKey, X25519_PKCS8_PREFIX, X25519_SPKI_PREFIX } from "./keys";

const X25519_KEY_BYTES = 32;

/** A fresh X25519 key pair as raw 32-byte keys (docs/protocol.md §9.5). */
export function generateX25519KeyPair(): { privateKey: Uint8Array; publicKey: Uint8Array } {
  const { privateKey, publicKey } = generateKeyPairSync("x25519");
  const der = privateKey.export({ format: "der", type: "pkcs8" });
  return { privateKey: new Uint8Array(der.subarray(der.length - X25519_KEY_BYTES)), publicKey: rawPublicKey(publicKey) };
}

function x25519Private(privateKey: Uint8Array) {
  if (privateKey.length !== X25519_KEY_BYTES) {
    throw new EcdhError(`x25519 private key must be ${X25519_KEY_BYTES} bytes`);
  }
  return createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, privateKey]), format: "der", type: "pkcs8" });
}

/** X25519(privateKey, peerPublicKey); like Go's curve25519.X25519 it rejects an all-zero result. */
export function x25519SharedSecret(privateKey: Uint8Array, peerPublicKey: Uint8Array): Uint8Array {
  if (peerPublicKey.length !== X25519_KEY_BYTES) {
    throw new EcdhError(`x25519 public key must be ${X25519_KEY_BYTES} bytes`);
  }
  const publicKey = createPublicKey({ key: Buffer.concat([X25519_SPKI_PREFIX, peerPublicKey]), format: "der", type: "spki" });
  const ownKey = x25519Private(privateKey);
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey: ownKey, publicKey });
  } catch (cause) {
    // OpenSSL refuses low-order points itself; report it the way Go does.
    throw new EcdhError("bad input point: low order point", { cause });
  }
  if (shared.every((byte) => byte === 0)) {
    throw new EcdhError("bad input point: low order point");
  }
  return new Uint8Array(shared);
}
