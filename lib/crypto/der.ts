/**
 * The small subset of ASN.1 DER needed to write and read PKCS#10 CSRs: definite lengths only,
 * single-byte tags. Anything else is rejected as malformed rather than guessed at.
 */

import { ProvisionerError } from "../errors";

export const TAG = {
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  printableString: 0x13,
  ia5String: 0x16,
  sequence: 0x30,
  set: 0x31,
} as const;

/** DER that cannot be encoded or decoded as the certificate code needs it. */
export class DerError extends ProvisionerError {}

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

export interface DerNode {
  tag: number;
  /** The whole encoding of this element (tag, length and content). */
  raw: Uint8Array;
  content: Uint8Array;
}

/** Reads one element at `offset`; returns it and the offset after it. */
export function readElement(bytes: Uint8Array, offset = 0): { node: DerNode; next: number } {
  const tag = bytes[offset];
  let lengthByte = bytes[offset + 1];
  if (tag === undefined || lengthByte === undefined) throw new DerError("truncated DER element");
  if ((tag & 0x1f) === 0x1f) throw new DerError("multi-byte tags are not supported");
  let position = offset + 2;
  let length = lengthByte;
  if (lengthByte & 0x80) {
    const count = lengthByte & 0x7f;
    if (count === 0 || count > 4) throw new DerError("unsupported DER length");
    length = 0;
    for (let index = 0; index < count; index++) {
      lengthByte = bytes[position++];
      if (lengthByte === undefined) throw new DerError("truncated DER length");
      length = length * 256 + lengthByte;
    }
  }
  const end = position + length;
  if (end > bytes.length) throw new DerError("DER element exceeds its container");
  return { node: { tag, raw: bytes.subarray(offset, end), content: bytes.subarray(position, end) }, next: end };
}

/** The child elements of a constructed element's content. */
export function children(content: Uint8Array): DerNode[] {
  const nodes: DerNode[] = [];
  for (let offset = 0; offset < content.length; ) {
    const { node, next } = readElement(content, offset);
    nodes.push(node);
    offset = next;
  }
  return nodes;
}

export function decodeOid(content: Uint8Array): string {
  const first = content[0];
  if (first === undefined) throw new DerError("empty OID");
  const arcs = [Math.floor(first / 40), first % 40];
  let value = 0;
  for (const byte of content.subarray(1)) {
    value = value * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      arcs.push(value);
      value = 0;
    }
  }
  return arcs.join(".");
}
