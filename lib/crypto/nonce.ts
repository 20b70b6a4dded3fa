import { sign, verify } from "node:crypto";
import { NonceSignatureError } from "../errors";
import { decodeHex, encodeHex } from "./encoding";
import { ED25519_PUBLIC_KEY_BYTES, ED25519_SIGNATURE_BYTES, ed25519PrivateKeyFromSeed, ed25519PublicKeyFromRaw, rawPublicKey } from "./keys";

/** What a node answers to gen25519: Ed25519 over the UTF-8 bytes of the nonce (simulator side). */
export function signNonce(seed: Uint8Array, nonce: string): { publicKeyHex: string; signatureHex: string } {
  const privateKey = ed25519PrivateKeyFromSeed(seed);
  const signature = sign(null, Buffer.from(nonce, "utf8"), privateKey);
  return { publicKeyHex: encodeHex(rawPublicKey(privateKey)), signatureHex: encodeHex(signature) };
}

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
