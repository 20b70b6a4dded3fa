/**
 * The small subset of ASN.1 DER needed to read PKCS#10 CSRs: definite lengths only, single-byte
 * tags. Anything else is rejected as malformed rather than guessed at. (Writing them is the node's
 * side: test/support/choria-node/der-writer.ts.)
 */

import { DerError } from "../errors";

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
