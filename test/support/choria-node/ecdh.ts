import { createPrivateKey, createPublicKey } from "node:crypto";
import { rawPublicKey, X25519_PKCS8_PREFIX } from "../../../lib/crypto/keys";
import { EcdhError } from "../../../lib/errors";

const X25519_KEY_BYTES = 32;

/** The raw public key of a raw X25519 private key (RFC 7748 clamping applied by OpenSSL), as the fixtures give keys. */
export function x25519PublicKey(privateKey: Uint8Array): Uint8Array {
  if (privateKey.length !== X25519_KEY_BYTES) {
    throw new EcdhError(`x25519 private key must be ${X25519_KEY_BYTES} bytes`);
  }
  return rawPublicKey(createPublicKey(createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, privateKey]), format: "der", type: "pkcs8" })));
}
