/**
 * Reading a KSUID back, as brokers and servers do to check that a token's `jti` carries its `iat`
 * (the provisioner only mints them: lib/crypto/ids.ts).
 */
import { EncodingError } from "../../../lib/errors";

/** KSUID epoch (2014-05-13T16:53:20Z) in Unix seconds. */
const KSUID_EPOCH_SECONDS = 1_400_000_000;
const KSUID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KSUID_LENGTH = 27;
const KSUID_BYTES = 20;
const KSUID_MAX = (1n << 160n) - 1n;

/** Decodes a KSUID into its 20 bytes; throws on a wrong length, foreign characters or overflow. */
export function parseKsuid(id: string): Uint8Array {
  if (id.length !== KSUID_LENGTH) {
    throw new EncodingError("invalid ksuid format");
  }
  let value = 0n;
  for (const char of id) {
    const digit = KSUID_ALPHABET.indexOf(char);
    if (digit < 0) {
      throw new EncodingError("invalid ksuid format");
    }
    value = value * 62n + BigInt(digit);
  }
  if (value > KSUID_MAX) {
    throw new EncodingError("invalid ksuid format");
  }
  return new Uint8Array(Buffer.from(value.toString(16).padStart(KSUID_BYTES * 2, "0"), "hex"));
}

/** The whole-second timestamp embedded in a KSUID. */
export function ksuidTime(id: string): Date {
  const seconds = Buffer.from(parseKsuid(id)).readUInt32BE(0);
  return new Date((seconds + KSUID_EPOCH_SECONDS) * 1000);
}
