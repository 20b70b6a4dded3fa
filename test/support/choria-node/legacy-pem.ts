/** The node's side of the key exchange: opening the encrypted key the provisioner sends (lib/crypto/legacy-pem.ts seals it). */
import { createDecipheriv } from "node:crypto";
import { decodeHex } from "../../../lib/crypto/encoding";
import { AES_BLOCK, decodeFirstPemBlock, deriveLegacyPemKey, LegacyPemError, SALT_BYTES } from "../../../lib/crypto/legacy-pem-format";

/**
 * Decrypts what encryptLegacyPem (or Go / OpenSSL) produced and returns the DER. A wrong password
 * almost always breaks the padding and reports "x509: decryption password incorrect" as Go does.
 */
export function decryptLegacyPem(pem: string, password: Uint8Array): Uint8Array {
  const block = decodeFirstPemBlock(pem);
  if (block.headers.get("Proc-Type") !== "4,ENCRYPTED") {
    throw new LegacyPemError("x509: no DEK-Info header in block");
  }
  const dekInfo = block.headers.get("DEK-Info");
  if (dekInfo === undefined) {
    throw new LegacyPemError("x509: no DEK-Info header in block");
  }
  const [mode, ivHex] = dekInfo.split(",");
  if (mode !== "AES-256-CBC") {
    throw new LegacyPemError(`x509: unknown encryption mode ${mode ?? ""}`);
  }
  let iv: Uint8Array;
  try {
    iv = decodeHex(ivHex ?? "");
  } catch (cause) {
    throw new LegacyPemError("x509: malformed DEK-Info IV", { cause });
  }
  if (iv.length !== AES_BLOCK) {
    throw new LegacyPemError("x509: incorrect IV size");
  }
  if (block.der.length === 0 || block.der.length % AES_BLOCK !== 0) {
    throw new LegacyPemError("x509: encrypted PEM data is not a multiple of the block size");
  }
  const key = deriveLegacyPemKey(password, iv.subarray(0, SALT_BYTES));
  const decipher = createDecipheriv("aes-256-cbc", key, iv);
  decipher.setAutoPadding(false);
  const padded = Buffer.concat([decipher.update(block.der), decipher.final()]);
  const padding = padded[padded.length - 1] ?? 0;
  const validPadding =
    padding >= 1 && padding <= AES_BLOCK && padded.subarray(padded.length - padding).every((byte) => byte === padding);
  if (!validPadding) {
    throw new LegacyPemError("x509: decryption password incorrect");
  }
  return new Uint8Array(padded.subarray(0, padded.length - padding));
}
