/**
 * The server side of the Choria envelopes (docs/protocol.md §2-§4), as a simulated node serves
 * them: requests in (with the schema rules a Choria server always enforces, so a malformed request
 * is dropped exactly where a real node drops it), replies out, and the TTL a server applies. The
 * provisioner's side is lib/choria/protocol.ts.
 */
import { decodeStrictBase64 } from "../../../lib/crypto/encoding";
import {
  base64,
  decodeTransport,
  json,
  type JsonObject,
  nanosText,
  orderedJson,
  parseObject,
  PROTOCOL,
  type ProtocolVersion,
  requireBase64,
  requireInteger,
  requireObject,
  requireString,
  sha256Base64,
  transportBytes,
  transportSender,
} from "../../../lib/choria/envelope";
import { EnvelopeError } from "../../../lib/choria/errors";
import type { Filter } from "../../../lib/choria/filter";
import { parseFilter } from "./filter";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../../lib/choria/protocol";

const utf8 = new TextDecoder("utf-8", { fatal: false });
const encoder = new TextEncoder();

export interface IncomingRequest {
  version: ProtocolVersion;
  replyTo: string;
  /** Transport header `mc_sender` (v1) / `sender` (v2). */
  transportSender: string;
  id: string;
  senderId: string;
  callerId: string;
  collective: string;
  agent: string;
  ttl: number;
  timeSeconds: number;
  filter: Filter;
  /** Payload after the server's "base64-decode if it decodes" quirk (§2.3). */
  payload: Uint8Array;
}

export interface OutgoingReply {
  version: ProtocolVersion;
  requestId: string;
  /** The replying node's identity: envelope sender and transport header. */
  senderId: string;
  agent: string;
  timeMs: number;
  /** Full-precision v2 time in epoch nanoseconds; overrides timeMs. */
  timeNs?: bigint;
  payload: Uint8Array;
}

/** The server-side quirk: payloads that happen to be base64 are decoded, anything else used raw. */
export function decodeBase64OrRaw(payload: Uint8Array): Uint8Array {
  return decodeStrictBase64(utf8.decode(payload)) ?? payload;
}

function requireNonEmptyBase64(object: JsonObject, key: string, layer: string): Uint8Array {
  const bytes = requireBase64(object, key, layer);
  if (bytes.byteLength === 0) throw new EnvelopeError(layer, `"${key}" must not be empty`);
  return bytes;
}

function optionalString(object: JsonObject | undefined, key: string, layer: string): string {
  const value = object?.[key];
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") throw new EnvelopeError(layer, `"${key}" must be a string`);
  return value;
}

export function encodeReply(reply: OutgoingReply): Uint8Array {
  if (reply.version === 1) {
    const replyJson = orderedJson([
      ["protocol", json(PROTOCOL[1].reply)],
      ["message", json(utf8.decode(reply.payload))],
      [
        "envelope",
        orderedJson([
          ["requestid", json(reply.requestId)],
          ["senderid", json(reply.senderId)],
          ["agent", json(reply.agent)],
          ["time", json(Math.trunc(reply.timeMs / 1000))],
        ]),
      ],
    ]);
    const secure = orderedJson([
      ["protocol", json(PROTOCOL[1].secureReply)],
      ["message", json(replyJson)],
      ["hash", json(sha256Base64(encoder.encode(replyJson)))],
    ]);
    return transportBytes(1, secure, [["mc_sender", json(reply.senderId)]]);
  }

  const replyBytes = encoder.encode(
    orderedJson([
      ["protocol", json(PROTOCOL[2].reply)],
      ["message", json(base64(reply.payload))],
      ["request", json(reply.requestId)],
      ["sender", json(reply.senderId)],
      ["agent", json(reply.agent)],
      ["time", nanosText(reply.timeMs, reply.timeNs)],
    ]),
  );
  const secure = orderedJson([
    ["protocol", json(PROTOCOL[2].secureReply)],
    ["reply", json(base64(replyBytes))],
    ["hash", json(sha256Base64(replyBytes))],
  ]);
  return transportBytes(2, secure, [["sender", json(reply.senderId)]]);
}

/**
 * Server side: decode a request with the schema rules a Choria server always enforces (§4.4, §13):
 * v1 requestid of exactly 32 characters, ttl >= 30, non-empty message, filter with
 * fact/cf_class/identity/compound; v2 non-empty caller, signature, sender and message, ttl >= 1, time >= 1.
 */
export function decodeRequest(bytes: Uint8Array, maxBytes = DEFAULT_MAX_MESSAGE_BYTES): IncomingRequest {
  const transport = decodeTransport(bytes, maxBytes);
  const version = transport.version;
  const secure = parseObject(utf8.decode(transport.data), "secure request");
  if (secure.protocol !== PROTOCOL[version].secureRequest) {
    throw new EnvelopeError("secure request", `unexpected protocol ${JSON.stringify(secure.protocol)}`);
  }
  const replyTo = optionalString(transport.headers, version === 1 ? "reply-to" : "reply", "transport headers");

  if (version === 1) {
    const message = requireString(secure, "message", "secure request");
    requireString(secure, "signature", "secure request");
    requireString(secure, "pubcert", "secure request");
    const request = parseObject(message, "request");
    if (request.protocol !== PROTOCOL[1].request) throw new EnvelopeError("request", `unexpected protocol ${JSON.stringify(request.protocol)}`);
    const envelope = requireObject(request, "envelope", "request");
    const id = requireString(envelope, "requestid", "request envelope");
    if (id.length !== 32) throw new EnvelopeError("request envelope", `"requestid" must be exactly 32 characters`);
    return {
      version,
      replyTo,
      transportSender: transportSender(transport),
      id,
      senderId: requireString(envelope, "senderid", "request envelope", 0),
      callerId: requireString(envelope, "callerid", "request envelope"),
      collective: requireString(envelope, "collective", "request envelope"),
      agent: requireString(envelope, "agent", "request envelope"),
      ttl: requireInteger(envelope, "ttl", "request envelope", 30),
      timeSeconds: requireInteger(envelope, "time", "request envelope"),
      filter: parseFilter(envelope.filter, true),
      payload: decodeBase64OrRaw(encoder.encode(requireString(request, "message", "request"))),
    };
  }

  const requestBytes = requireNonEmptyBase64(secure, "request", "secure request");
  requireNonEmptyBase64(secure, "signature", "secure request");
  requireString(secure, "caller", "secure request");
  const request = parseObject(utf8.decode(requestBytes), "request");
  if (request.protocol !== PROTOCOL[2].request) throw new EnvelopeError("request", `unexpected protocol ${JSON.stringify(request.protocol)}`);
  return {
    version,
    replyTo,
    transportSender: transportSender(transport),
    id: requireString(request, "id", "request"),
    senderId: requireString(request, "sender", "request"),
    callerId: requireString(request, "caller", "request"),
    collective: requireString(request, "collective", "request"),
    agent: requireString(request, "agent", "request"),
    ttl: requireInteger(request, "ttl", "request", 1),
    timeSeconds: Math.trunc(requireInteger(request, "time", "request", 1) / 1e9),
    filter: request.filter === undefined ? parseFilter(undefined, false) : parseFilter(request.filter, true),
    payload: decodeBase64OrRaw(requireNonEmptyBase64(request, "message", "request")),
  };
}

/** The TTL rule servers apply: accepted iff now - ttl < time < now + ttl (seconds, strict). */
export function withinTtl(request: Pick<IncomingRequest, "ttl" | "timeSeconds">, nowMs: number): boolean {
  const now = Math.trunc(nowMs / 1000);
  return request.timeSeconds > now - request.ttl && request.timeSeconds < now + request.ttl;
}
