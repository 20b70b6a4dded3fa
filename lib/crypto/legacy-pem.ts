import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { ProvisionerError } from "../errors";
import { decodeHex } from "./encoding";

/** A legacy encrypted PEM could not be produced or opened (bad PEM, headers, or password). */
export class LegacyPemError extends ProvisionerError {}

const AES_BLOCK = 16;
const AES_256_KEY = 32;
const SALT_BYTES = 8;

interface PemBlock {
  type: string;
  headers: Map<string, string>;
  der: Uint8Array;
}

/** The first PEM block of `text` with its RFC 1421 headers; throws when there is none. */
function decodeFirstPemBlock(text: string): PemBlock {
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
