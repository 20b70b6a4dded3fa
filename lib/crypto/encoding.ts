/**
 * Strict codecs. Node's Buffer decoders silently skip invalid characters; Go's decoders reject them,
 * and a key or signature that decodes "partly" must fail here exactly as it does in Go.
 */

import { EncodingError } from "../errors";

const HEX_PATTERN = /^[0-9a-fA-F]*$/;
const BASE64URL_PATTERN = /^[A-Za-z0-9_-]*$/;

/** Decodes hex like Go's encoding/hex: even length, hex digits of either case, nothing else. */
export function decodeHex(text: string): Uint8Array {
  if (text.length % 2 !== 0) {
    throw new EncodingError("encoding/hex: odd length hex string");
  }
  if (!HEX_PATTERN.test(text)) {
    throw new EncodingError("encoding/hex: invalid byte");
  }
  return new Uint8Array(Buffer.from(text, "hex"));
}

export function encodeHex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

/** Go's encoding/base64 skips these two wherever they occur (so a JWT file's trailing newline decodes). */
const GO_IGNORED_NEWLINES = /[\r\n]/g;

/**
 * Decodes unpadded base64url (RFC 7515 segments) like Go's RawURLEncoding: CR and LF are skipped,
 * padding or any other foreign character (space, tab, `+`, `/`) is malformed.
 */
export function decodeBase64Url(text: string): Uint8Array {
  const data = text.replace(GO_IGNORED_NEWLINES, "");
  if (!BASE64URL_PATTERN.test(data) || data.length % 4 === 1) {
    throw new EncodingError("illegal base64url data");
  }
  return new Uint8Array(Buffer.from(data, "base64url"));
}

export function encodeBase64Url(bytes: Uint8Array | string): string {
  return Buffer.from(bytes).toString("base64url");
}

const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Go's base64.StdEncoding strictness: padded, standard alphabet. */
export function decodeStrictBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !STRICT_BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, "base64");
  // Buffer ignores bad padding placement; a round trip catches it.
  return bytes.toString("base64") === text ? new Uint8Array(bytes) : undefined;
}
