import { verify } from "node:crypto";
import { NonceSignatureError } from "../errors";
import { decodeHex } from "./encoding";
import { ED25519_PUBLIC_KEY_BYTES, ED25519_SIGNATURE_BYTES, ed25519PublicKeyFromRaw } from "./keys";

function decodeField(hex: string, name: string, length: number): Uint8Array {
  if (hex === "") {
    throw new NonceSignatureError(`no ${name} received`);
  }
  let bytes: Uint8Array;
  try {
    bytes = decodeHex(hex);
  } catch (cause) {
    throw new NonceSignatureError(`invalid ${name}: not hex encoded`, { cause });
  }
  if (bytes.length !== length) {
    throw new NonceSignatureError(`invalid ${name}: expected ${length} bytes, got ${bytes.length}`);
  }
  return bytes;
}

/** Checks a node's gen25519 reply (docs/protocol.md §7 step 2); throws NonceSignatureError. */
export function verifyNonceSignature(publicKeyHex: string, nonce: string, signatureHex: string): void {
  const publicKey = decodeField(publicKeyHex, "public key", ED25519_PUBLIC_KEY_BYTES);
  const signature = decodeField(signatureHex, "signature", ED25519_SIGNATURE_BYTES);
  if (!verify(null, Buffer.from(nonce, "utf8"), ed25519PublicKeyFromRaw(publicKey), signature)) {
    throw new NonceSignatureError("invalid nonce signature");
  }
}
