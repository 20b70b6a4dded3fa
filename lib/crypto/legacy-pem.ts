import { createCipheriv, randomBytes } from "node:crypto";
import { AES_BLOCK, decodeFirstPemBlock, deriveLegacyPemKey, LegacyPemError, SALT_BYTES } from "./legacy-pem-format";

function wrap64(base64: string): string {
  return base64.match(/.{1,64}/g)?.join("\n") ?? "";
}

/**
 * Encrypts a helper-supplied key for a node like Go's x509.EncryptPEMBlock with AES-256-CBC
 * (docs/protocol.md §9.6): the DER of the first PEM block, re-labelled `RSA PRIVATE KEY`.
 * `password` is the raw 32-byte ECDH shared secret.
 */
export function encryptLegacyPem(pem: string, password: Uint8Array, iv: Uint8Array = randomBytes(AES_BLOCK)): string {
  if (iv.length !== AES_BLOCK) {
    throw new LegacyPemError(`IV must be ${AES_BLOCK} bytes`);
  }
  const { der } = decodeFirstPemBlock(pem);
  const key = deriveLegacyPemKey(password, iv.subarray(0, SALT_BYTES));
  const cipher = createCipheriv("aes-256-cbc", key, iv);
  const ciphertext = Buffer.concat([cipher.update(der), cipher.final()]);
  return [
    "-----BEGIN RSA PRIVATE KEY-----",
    "Proc-Type: 4,ENCRYPTED",
    `DEK-Info: AES-256-CBC,${Buffer.from(iv).toString("hex")}`,
    "",
    wrap64(ciphertext.toString("base64")),
    "-----END RSA PRIVATE KEY-----",
    "",
  ].join("\n");
}
