/**
 * Choria protocol v1 and v2 envelopes (docs/protocol.md §2-§4), the client side the provisioner
 * uses: requests out, replies in. The layers' shared encoding is lib/choria/envelope.ts; the server
 * side (requests in, replies out) is the simulated node's, test/support/choria-node/protocol.ts.
 */
import { replySubjectHash } from "../crypto/ids";
import {
  base64,
  decodeTransport,
  json,
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
  type JsonObject,
} from "./envelope";
import { EnvelopeError } from "./errors";
import type { Filter } from "./filter";

const utf8 = new TextDecoder("utf-8", { fatal: false });
const encoder = new TextEncoder();

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

export interface IncomingReply {
  version: ProtocolVersion;
  transportSender: string;
  requestId: string;
  senderId: string;
  agent: string;
  timeSeconds: number;
  payload: Uint8Array;
}

export function replySubject(collective: string, callerId: string, requestId: string): string {
  return `${collective}.reply.${replySubjectHash(callerId)}.${requestId}`;
}

export function nodeSubject(collective: string, identity: string): string {
  return `${collective}.node.${identity}`;
}

export function broadcastSubject(collective: string, agent: string): string {
  return `${collective}.broadcast.agent.${agent}`;
}

function filterJson(filter: Filter): string {
  return orderedJson([
    ["fact", json(filter.fact)],
    ["cf_class", json(filter.cf_class)],
    ["agent", json(filter.agent)],
    ["identity", json(filter.identity)],
    ["compound", json(filter.compound)],
  ]);
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
