/**
 * Choria protocol v1 and v2 envelopes (docs/protocol.md §2-§4): the onion of transport -> secure
 * request/reply -> request/reply -> payload, in both directions. The client side (requests out,
 * replies in) is what the provisioner uses; the server side (requests in, replies out) serves the
 * fleet simulator, and applies the same schema rules a real server enforces so a malformed request
 * is dropped exactly where a real node would drop it.
 */
import { createHash } from "node:crypto";
import { replySubjectHash } from "../crypto/ids";
import { EnvelopeError } from "./errors";
import { type Filter, parseFilter } from "./filter";

export { EnvelopeError };

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

/** NATS' default max_payload; anything larger never comes from a real node. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** The discovery ping payload: base64 of `ping`, because servers base64-decode payloads (§5). */
export const DISCOVERY_PING = new TextEncoder().encode("cGluZw==");

/** How a request is signed. Provisioning-mode servers never verify, but the schema wants fillers. */
export type RequestSigner =
  | { version: 1; kind: "insecure" }
  | { version: 1; kind: "x509"; pubcert: string; sign(message: Uint8Array): Uint8Array }
  | { version: 2; callerJwt: string; sign(request: Uint8Array): Uint8Array };

export interface OutgoingRequest {
  id: string;
  senderId: string;
  callerId: string;
  collective: string;
  agent: string;
  ttl: number;
  /** Wall-clock epoch milliseconds; v1 sends seconds, v2 nanoseconds. */
  timeMs: number;
  /** Full-precision v2 time in epoch nanoseconds (Go sends real nanoseconds); overrides timeMs. */
  timeNs?: bigint;
  filter: Filter;
  /** Payload bytes: the RPC request JSON, or DISCOVERY_PING. */
  payload: Uint8Array;
  replyTo: string;
  signer: RequestSigner;
}

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

export interface IncomingReply {
  version: ProtocolVersion;
  transportSender: string;
  requestId: string;
  senderId: string;
  agent: string;
  timeSeconds: number;
  payload: Uint8Array;
}

const utf8 = new TextDecoder("utf-8", { fatal: false });
const encoder = new TextEncoder();

export function replySubject(collective: string, callerId: string, requestId: string): string {
  return `${collective}.reply.${replySubjectHash(callerId)}.${requestId}`;
}

export function nodeSubject(collective: string, identity: string): string {
  return `${collective}.node.${identity}`;
}

export function broadcastSubject(collective: string, agent: string): string {
  return `${collective}.broadcast.agent.${agent}`;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

function sha256Base64(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64");
}

const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Go's base64.StdEncoding strictness: padded, standard alphabet. */
export function decodeStrictBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !STRICT_BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, "base64");
  // Buffer ignores bad padding placement; a round trip catches it.
  return bytes.toString("base64") === text ? new Uint8Array(bytes) : undefined;
}

/** The server-side quirk: payloads that happen to be base64 are decoded, anything else used raw. */
export function decodeBase64OrRaw(payload: Uint8Array): Uint8Array {
  return decodeStrictBase64(utf8.decode(payload)) ?? payload;
}

/** JSON object text with keys in the given order; values are already JSON text. */
function orderedJson(entries: Array<[string, string]>): string {
  return `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`;
}

const json = (value: unknown) => JSON.stringify(value);

function filterJson(filter: Filter): string {
  return orderedJson([
    ["fact", json(filter.fact)],
    ["cf_class", json(filter.cf_class)],
    ["agent", json(filter.agent)],
    ["identity", json(filter.identity)],
    ["compound", json(filter.compound)],
  ]);
}

function nanosText(timeMs: number, timeNs: bigint | undefined): string {
  return (timeNs ?? BigInt(Math.trunc(timeMs)) * 1_000_000n).toString();
}

/** The outer transport: the secure layer as base64 `data` plus routing headers (JSON text values). */
function transportBytes(version: ProtocolVersion, secureJson: string, headers: Array<[string, string]>): Uint8Array {
  return encoder.encode(
    orderedJson([
      ["protocol", json(PROTOCOL[version].transport)],
      ["data", json(base64(encoder.encode(secureJson)))],
      ["headers", orderedJson(headers)],
    ]),
  );
}

export function encodeRequest(request: OutgoingRequest): Uint8Array {
  const { signer } = request;
  if (signer.version === 1) {
    const requestJson = orderedJson([
      ["protocol", json(PROTOCOL[1].request)],
      ["message", json(utf8.decode(request.payload))],
      [
        "envelope",
        orderedJson([
          ["requestid", json(request.id)],
          ["senderid", json(request.senderId)],
          ["callerid", json(request.callerId)],
          ["collective", json(request.collective)],
          ["agent", json(request.agent)],
          ["ttl", json(request.ttl)],
          ["time", json(Math.trunc(request.timeMs / 1000))],
          ["filter", filterJson(request.filter)],
        ]),
      ],
    ]);
    const signature = signer.kind === "insecure" ? "insecure" : base64(signer.sign(encoder.encode(requestJson)));
    const pubcert = signer.kind === "insecure" ? "insecure" : signer.pubcert;
    const secure = orderedJson([
      ["protocol", json(PROTOCOL[1].secureRequest)],
      ["message", json(requestJson)],
      ["signature", json(signature)],
      ["pubcert", json(pubcert)],
    ]);
    return transportBytes(1, secure, [["reply-to", json(request.replyTo)], ["mc_sender", json(request.senderId)]]);
  }

  const requestBytes = encoder.encode(
    orderedJson([
      ["protocol", json(PROTOCOL[2].request)],
      ["message", json(base64(request.payload))],
      ["id", json(request.id)],
      ["sender", json(request.senderId)],
      ["caller", json(request.callerId)],
      ["collective", json(request.collective)],
      ["agent", json(request.agent)],
      ["ttl", json(request.ttl)],
      ["time", nanosText(request.timeMs, request.timeNs)],
      ["filter", filterJson(request.filter)],
    ]),
  );
  const secure = orderedJson([
    ["protocol", json(PROTOCOL[2].secureRequest)],
    ["request", json(base64(requestBytes))],
    ["signature", json(base64(signer.sign(requestBytes)))],
    ["caller", json(signer.callerJwt)],
  ]);
  return transportBytes(2, secure, [["reply", json(request.replyTo)], ["sender", json(request.senderId)]]);
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

type JsonObject = Record<string, unknown>;

function parseObject(text: string, layer: string): JsonObject {
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

function requireString(object: JsonObject, key: string, layer: string, minLength = 1): string {
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

function requireInteger(object: JsonObject, key: string, layer: string, minimum?: number): number {
  const value = object[key];
  if (typeof value !== "number" || !Number.isInteger(value)) throw new EnvelopeError(layer, `"${key}" must be an integer`);
  if (minimum !== undefined && value < minimum) throw new EnvelopeError(layer, `"${key}" must be at least ${minimum}`);
  return value;
}

function requireBase64(object: JsonObject, key: string, layer: string): Uint8Array {
  const bytes = decodeStrictBase64(requireString(object, key, layer, 0));
  if (!bytes) throw new EnvelopeError(layer, `"${key}" is not valid base64`);
  return bytes;
}

function requireNonEmptyBase64(object: JsonObject, key: string, layer: string): Uint8Array {
  const bytes = requireBase64(object, key, layer);
  if (bytes.byteLength === 0) throw new EnvelopeError(layer, `"${key}" must not be empty`);
  return bytes;
}

function requireObject(object: JsonObject, key: string, layer: string): JsonObject {
  const value = object[key];
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new EnvelopeError(layer, `"${key}" must be an object`);
  return value as JsonObject;
}

interface Transport {
  version: ProtocolVersion;
  data: Uint8Array;
  headers: JsonObject | undefined;
}

function decodeTransport(bytes: Uint8Array, maxBytes: number): Transport {
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

function transportSender(transport: Transport): string {
  return optionalString(transport.headers, transport.version === 1 ? "mc_sender" : "sender", "transport headers");
}

/** Only the transport's sender header: all broadcast discovery needs (§5). */
export function readTransportSender(bytes: Uint8Array, maxBytes = DEFAULT_MAX_MESSAGE_BYTES): string {
  return transportSender(decodeTransport(bytes, maxBytes));
}

/** Client side: decode a reply and verify its hash. Throws EnvelopeError naming the bad layer. */
export function decodeReply(bytes: Uint8Array, maxBytes = DEFAULT_MAX_MESSAGE_BYTES): IncomingReply {
  const transport = decodeTransport(bytes, maxBytes);
  const version = transport.version;
  const secure = parseObject(utf8.decode(transport.data), "secure reply");
  if (secure.protocol !== PROTOCOL[version].secureReply) {
    throw new EnvelopeError("secure reply", `unexpected protocol ${JSON.stringify(secure.protocol)}`);
  }
  const hash = requireString(secure, "hash", "secure reply");

  let replyBytes: Uint8Array;
  if (version === 1) {
    replyBytes = encoder.encode(requireString(secure, "message", "secure reply"));
  } else {
    replyBytes = requireBase64(secure, "reply", "secure reply");
  }
  if (sha256Base64(replyBytes) !== hash) throw new EnvelopeError("secure reply", "hash does not match the reply");

  const reply = parseObject(utf8.decode(replyBytes), "reply");
  if (reply.protocol !== PROTOCOL[version].reply) {
    throw new EnvelopeError("reply", `unexpected protocol ${JSON.stringify(reply.protocol)}`);
  }
  if (version === 1) {
    const envelope = requireObject(reply, "envelope", "reply");
    return {
      version,
      transportSender: transportSender(transport),
      requestId: requireString(envelope, "requestid", "reply envelope"),
      senderId: requireString(envelope, "senderid", "reply envelope"),
      agent: requireString(envelope, "agent", "reply envelope"),
      timeSeconds: requireInteger(envelope, "time", "reply envelope"),
      payload: encoder.encode(requireString(reply, "message", "reply", 0)),
    };
  }
  return {
    version,
    transportSender: transportSender(transport),
    requestId: requireString(reply, "request", "reply"),
    senderId: requireString(reply, "sender", "reply"),
    agent: requireString(reply, "agent", "reply"),
    timeSeconds: Math.trunc(requireNumber(reply, "time", "reply") / 1e9),
    payload: requireBase64(reply, "message", "reply"),
  };
}

function requireNumber(object: JsonObject, key: string, layer: string): number {
  const value = object[key];
  if (typeof value !== "number" || !Number.isFinite(value)) throw new EnvelopeError(layer, `"${key}" must be a number`);
  return value;
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
