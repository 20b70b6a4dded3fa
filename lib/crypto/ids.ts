import { createHash, randomBytes, randomUUID } from "node:crypto";

/** KSUID epoch (2014-05-13T16:53:20Z) in Unix seconds. */
const KSUID_EPOCH_SECONDS = 1_400_000_000;
const KSUID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KSUID_LENGTH = 27;
const KSUID_BYTES = 20;
const KSUID_PAYLOAD_BYTES = 16;

/**
 * A KSUID: uint32 BE seconds since the KSUID epoch followed by 16 random bytes, base62 encoded and
 * left-padded with '0' to 27 characters. Token `jti` values must be a KSUID whose time equals `iat`.
 */
export function ksuid(date: Date = new Date(), random?: Uint8Array): string {
  const seconds = Math.floor(date.getTime() / 1000) - KSUID_EPOCH_SECONDS;
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > 0xffff_ffff) {
    throw new RangeError("time is outside the KSUID range");
  }
  const payload = random ?? randomBytes(KSUID_PAYLOAD_BYTES);
  if (payload.length !== KSUID_PAYLOAD_BYTES) {
    throw new RangeError(`KSUID payload must be ${KSUID_PAYLOAD_BYTES} bytes`);
  }
  const bytes = Buffer.alloc(KSUID_BYTES);
  bytes.writeUInt32BE(seconds, 0);
  Buffer.from(payload).copy(bytes, 4);

  let value = BigInt(`0x${bytes.toString("hex")}`);
  let text = "";
  while (value > 0n) {
    text = KSUID_ALPHABET[Number(value % 62n)] + text;
    value /= 62n;
  }
  return text.padStart(KSUID_LENGTH, "0");
}

/** UUIDv4 without dashes (32 lowercase hex): v1 request ids and gen25519 nonces. */
export function uuidHex(): string {
  return randomUUID().replaceAll("-", "");
}

/** md5 hex of a callerid: the middle token of `provisioning.reply.<hash>.<request id>`. */
export function replySubjectHash(callerid: string): string {
  return createHash("md5").update(callerid, "utf8").digest("hex");
}
