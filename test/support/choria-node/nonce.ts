import { sign } from "node:crypto";
import { encodeHex } from "../../../lib/crypto/encoding";
import { ed25519PrivateKeyFromSeed, rawPublicKey } from "../../../lib/crypto/keys";

/** What a node answers to gen25519: Ed25519 over the UTF-8 bytes of the nonce (the provisioner checks it: lib/crypto/nonce.ts). */
export function signNonce(seed: Uint8Array, nonce: string): { publicKeyHex: string; signatureHex: string } {
  const privateKey = ed25519PrivateKeyFromSeed(seed);
  const signature = sign(null, Buffer.from(nonce, "utf8"), privateKey);
  return { publicKeyHex: encodeHex(rawPublicKey(privateKey)), signatureHex: encodeHex(signature) };
}
