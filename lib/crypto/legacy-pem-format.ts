/**
 * What Go's legacy PEM encryption (x509.EncryptPEMBlock / DecryptPEMBlock) shares between sealing
 * and opening: the first PEM block with its RFC 1421 headers, and OpenSSL's key derivation.
 */
import { createHash } from "node:crypto";
import { ProvisionerError } from "../errors";

/** A legacy encrypted PEM could not be produced or opened (bad PEM, headers, or password). */
export class LegacyPemError extends ProvisionerError {}

export const AES_BLOCK = 16;
const AES_256_KEY = 32;
export const SALT_BYTES = 8;

interface PemBlock {
  type: string;
  headers: Map<string, string>;
  der: Uint8Array;
}

/** The first PEM block of `text` with its RFC 1421 headers; throws when there is none. */
export function decodeFirstPemBlock(text: string): PemBlock {
  const match = /-----BEGIN ([^-\r\n]+)-----\r?\n([\s\S]*?)-----END \1-----/.exec(text);
  if (!match) {
    throw new LegacyPemError("no PEM block found");
  }
  const type = match[1] as string;
  const lines = (match[2] as string).split(/\r?\n/);
  const headers = new Map<string, string>();
  let index = 0;
  for (; index < lines.length; index++) {
    const line = lines[index] as string;
    const colon = line.indexOf(":");
    if (colon < 0) break;
    headers.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  const body = lines.slice(index).join("").trim();
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body)) {
    throw new LegacyPemError(`invalid base64 in PEM block ${type}`);
  }
  return { type, headers, der: new Uint8Array(Buffer.from(body, "base64")) };
}

/** OpenSSL EVP_BytesToKey(MD5, count 1) for AES-256: D1 = MD5(pw‖salt), D2 = MD5(D1‖pw‖salt). */
export function deriveLegacyPemKey(password: Uint8Array, salt: Uint8Array): Uint8Array {
  const key = Buffer.alloc(AES_256_KEY);
  let previous = Buffer.alloc(0);
  let filled = 0;
  while (filled < AES_256_KEY) {
    previous = createHash("md5").update(previous).update(password).update(salt).digest();
    filled += previous.copy(key, filled);
  }
  return new Uint8Array(key);
}
