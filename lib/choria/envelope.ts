/**
 * The layers every Choria envelope shares (docs/protocol.md §2-§4), in both directions: protocol
 * names, JSON written with Go's key order, the transport around the secure layer, and the schema
 * reads that name the layer a message was wrong in.
 */
import { createHash } from "node:crypto";
import { decodeStrictBase64 } from "../crypto/encoding";
import { EnvelopeError } from "./errors";

const utf8 = new TextDecoder("utf-8", { fatal: false });
const encoder = new TextEncoder();

export type ProtocolVersion = 1 | 2;

export const PROTOCOL = {
  1: {
    request: "choria:request:1",
    reply: "choria:reply:1",
    secureRequest: "choria:secure:request:1",
    secureReply: "choria:secure:reply:1",
    transport: "choria:transport:1",
  },
  2: {
    request: "io.choria.protocol.v2.request",
    reply: "io.choria.protocol.v2.reply",
    secureRequest: "io.choria.protocol.v2.secure_request",
    secureReply: "io.choria.protocol.v2.secure_reply",
    transport: "io.choria.protocol.v2.transport",
  },
} as const;

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

export function sha256Base64(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64");
}

/** A short public name for data (a reply, a key): the first 16 hex digits of its sha256. */
export function fingerprint(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex").slice(0, 16);
}

/** JSON object text with keys in the given order; values are already JSON text. */
export function orderedJson(entries: Array<[string, string]>): string {
  return `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`;
}

export const json = (value: unknown) => JSON.stringify(value);

export function nanosText(timeMs: number, timeNs: bigint | undefined): string {
  return (timeNs ?? BigInt(Math.trunc(timeMs)) * 1_000_000n).toString();
}

/** The outer transport: the secure layer as base64 `data` plus routing headers (JSON text values). */
export function transportBytes(version: ProtocolVersion, secureJson: string, headers: Array<[string, string]>): Uint8Array {
  return encoder.encode(
    orderedJson([
      ["protocol", json(PROTOCOL[version].transport)],
      ["data", json(base64(encoder.encode(secureJson)))],
      ["headers", orderedJson(headers)],
    ]),
  );
}

export type JsonObject = Record<string, unknown>;

export function parseObject(text: string, layer: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new EnvelopeError(layer, "not JSON", { cause: error });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new EnvelopeError(layer, "not a JSON object");
  }
  return value as JsonObject;
}

export function requireString(object: JsonObject, key: string, layer: string, minLength = 1): string {
  const value = object[key];
  if (typeof value !== "string") throw new EnvelopeError(layer, `"${key}" must be a string`);
  if (value.length < minLength) throw new EnvelopeError(layer, `"${key}" must not be empty`);
  return value;
}

function optionalString(object: JsonObject | undefined, key: string, layer: string): string {
  const value = object?.[key];
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new EnvelopeError(layer, `"${key}" must be a string`);
  return value;
}

export function requireInteger(object: JsonObject, key: string, layer: string, minimum?: number): number {
  const value = object[key];
  if (typeof value !== "number" || !Number.isInteger(value)) throw new EnvelopeError(layer, `"${key}" must be an integer`);
  if (minimum !== undefined && value < minimum) throw new EnvelopeError(layer, `"${key}" must be at least ${minimum}`);
  return value;
}

export function requireBase64(object: JsonObject, key: string, layer: string): Uint8Array {
  const bytes = decodeStrictBase64(requireString(object, key, layer, 0));
  if (!bytes) throw new EnvelopeError(layer, `"${key}" is not valid base64`);
  return bytes;
}

export function requireObject(object: JsonObject, key: string, layer: string): JsonObject {
  const value = object[key];
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new EnvelopeError(layer, `"${key}" must be an object`);
  return value as JsonObject;
}

interface Transport {
  version: ProtocolVersion;
  data: Uint8Array;
  headers: JsonObject | undefined;
}

export function decodeTransport(bytes: Uint8Array, maxBytes: number): Transport {
  if (bytes.byteLength > maxBytes) {
    throw new EnvelopeError("transport", `message of ${bytes.byteLength} bytes exceeds the ${maxBytes} byte limit`);
  }
  const transport = parseObject(utf8.decode(bytes), "transport");
  const protocol = transport.protocol;
  const version = protocol === PROTOCOL[1].transport ? 1 : protocol === PROTOCOL[2].transport ? 2 : undefined;
  if (!version) throw new EnvelopeError("transport", `unknown protocol ${JSON.stringify(protocol)}`);
  const headers = transport.headers;
  if (headers !== undefined && (typeof headers !== "object" || headers === null || Array.isArray(headers))) {
    throw new EnvelopeError("transport", `"headers" must be an object`);
  }
  return { version, data: requireBase64(transport, "data", "transport"), headers: headers as JsonObject | undefined };
}

export function transportSender(transport: Transport): string {
  return optionalString(transport.headers, transport.version === 1 ? "mc_sender" : "sender", "transport headers");
}

