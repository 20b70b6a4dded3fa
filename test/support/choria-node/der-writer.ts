/**
 * Writing the DER of a PKCS#10 CSR, as a node's gencsr does (the provisioner only reads CSRs:
 * lib/crypto/der.ts). Definite lengths and single-byte tags only.
 */
import { TAG } from "../../../lib/crypto/der";
import { DerError } from "../../../lib/errors";

function encodeLength(length: number): Uint8Array {
  if (length < 0x80) return Uint8Array.of(length);
  const bytes: number[] = [];
  for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

export function tlv(tag: number, content: Uint8Array): Uint8Array {
  return Buffer.concat([Uint8Array.of(tag), encodeLength(content.length), content]);
}

export const sequence = (...items: Uint8Array[]) => tlv(TAG.sequence, Buffer.concat(items));
export const set = (...items: Uint8Array[]) => tlv(TAG.set, Buffer.concat(items));
export const derNull = () => tlv(TAG.null, new Uint8Array(0));
export const octetString = (content: Uint8Array) => tlv(TAG.octetString, content);
/** A BIT STRING with no unused bits. */
export const bitString = (content: Uint8Array) => tlv(TAG.bitString, Buffer.concat([Uint8Array.of(0), content]));

/** A small non-negative INTEGER (CSR version). */
export function smallInteger(value: number): Uint8Array {
  if (!Number.isInteger(value) || value < 0 || value > 127) throw new DerError("only integers 0..127 are supported");
  return tlv(TAG.integer, Uint8Array.of(value));
}

export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split(".").map((arc) => Number.parseInt(arc, 10));
  const [first, second, ...rest] = arcs;
  if (first === undefined || second === undefined) throw new DerError(`invalid OID ${dotted}`);
  const bytes: number[] = [first * 40 + second];
  for (const arc of rest) {
    const chunk: number[] = [arc & 0x7f];
    for (let value = Math.floor(arc / 128); value > 0; value = Math.floor(value / 128)) chunk.unshift(0x80 | (value & 0x7f));
    bytes.push(...chunk);
  }
  return tlv(TAG.oid, Uint8Array.from(bytes));
}
