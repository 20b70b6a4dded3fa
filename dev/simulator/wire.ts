/**
 * Turning a node's answer into the NATS messages it publishes, honest or broken as the node's
 * wire faults say (wrong sender, foreign request id, bad hash, malformed layer, oversized,
 * duplicated). Honest replies are exactly the codec's encodeReply.
 */
import { createHash, randomUUID } from "node:crypto";
import { encodeReply } from "../../test/support/choria-node/protocol";
import { PROTOCOL, type ProtocolVersion } from "../../lib/choria/envelope";
import { ksuid } from "../../lib/crypto/ids";
import { type MalformedLayer, type NodeFaults, selects, selectsIfSet } from "./faults";
import type { NodeReply } from "./node";

export interface ReplyContext {
  identity: string;
  version: ProtocolVersion;
  requestId: string;
  nowMs: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

type JsonObject = Record<string, unknown>;

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}

function sha256Base64(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64");
}

/** The inner reply JSON bytes, from inside the secure reply, for re-wrapping. */
interface Onion {
  transport: JsonObject;
  secure: JsonObject;
  replyBytes: Uint8Array;
}

function peel(message: Uint8Array, version: ProtocolVersion): Onion {
  const transport = JSON.parse(decoder.decode(message)) as JsonObject;
  const secure = JSON.parse(Buffer.from(transport.data as string, "base64").toString("utf8")) as JsonObject;
  const replyBytes = version === 1 ? encoder.encode(secure.message as string) : new Uint8Array(Buffer.from(secure.reply as string, "base64"));
  return { transport, secure, replyBytes };
}

function wrap(onion: Onion, version: ProtocolVersion, hash: string = sha256Base64(onion.replyBytes)): Uint8Array {
  const secure =
    version === 1
      ? { protocol: PROTOCOL[1].secureReply, message: decoder.decode(onion.replyBytes), hash }
      : { protocol: PROTOCOL[2].secureReply, reply: base64(onion.replyBytes), hash };
  return encoder.encode(JSON.stringify({ ...onion.transport, data: base64(encoder.encode(JSON.stringify(secure))) }));
}

function foreignId(version: ProtocolVersion): string {
  return version === 1 ? randomUUID().replaceAll("-", "") : ksuid();
}

function malformed(layer: MalformedLayer, honest: Uint8Array, version: ProtocolVersion): Uint8Array {
  const onion = peel(honest, version);
  switch (layer) {
    case "transport":
      return encoder.encode(`{"protocol":"${PROTOCOL[version].transport}","data":`);
    case "secure":
      return encoder.encode(JSON.stringify({ ...onion.transport, data: base64(encoder.encode("{not json")) }));
    case "reply":
      return wrap({ ...onion, replyBytes: encoder.encode("{not json") }, version);
    case "mcorpc":
      // Only reached for RPC replies; the envelope is sound, its message is not a reply body.
      return honest;
  }
}

function padded(payload: Uint8Array, bytes: number): Uint8Array {
  const body = JSON.parse(decoder.decode(payload)) as JsonObject;
  const data = (body.data && typeof body.data === "object" ? body.data : {}) as JsonObject;
  return encoder.encode(JSON.stringify({ ...body, data: { ...data, padding: "x".repeat(bytes) } }));
}

/** Zero, one or two messages to publish for `reply` (zero never happens here: silence is the node's call). */
export function encodeNodeReplies(reply: NodeReply, context: ReplyContext, faults: NodeFaults): Uint8Array[] {
  const on = (selector: Parameters<typeof selects>[0]) => selectsIfSet(selector, reply.agent, reply.action);
  const isRpc = reply.agent !== "discovery";
  const sender = faults.wrongSender && selects(faults.wrongSender.on, reply.agent, reply.action) ? faults.wrongSender : undefined;

  let payload = reply.payload;
  const oversized = faults.oversized && selects(faults.oversized.on, reply.agent, reply.action) ? faults.oversized : undefined;
  if (oversized && isRpc) payload = padded(payload, oversized.bytes);
  const malformedLayer = faults.malformed && selects(faults.malformed.on, reply.agent, reply.action) ? faults.malformed.layer : undefined;
  if (malformedLayer === "mcorpc") payload = encoder.encode(isRpc ? "{not an rpc reply" : "");

  let message = encodeReply({
    version: context.version,
    requestId: on(faults.foreignRequestId) ? foreignId(context.version) : context.requestId,
    senderId: sender?.envelope ?? context.identity,
    agent: reply.agent,
    timeMs: context.nowMs,
    payload,
  });

  if (sender?.envelope !== undefined || sender?.transport !== undefined) {
    const onion = peel(message, context.version);
    const header = context.version === 1 ? "mc_sender" : "sender";
    onion.transport.headers = { ...(onion.transport.headers as JsonObject), [header]: sender.transport ?? context.identity };
    message = wrap(onion, context.version);
  }
  if (on(faults.badHash)) {
    message = wrap(peel(message, context.version), context.version, sha256Base64(encoder.encode("tampered")));
  }
  if (malformedLayer !== undefined && malformedLayer !== "mcorpc") message = malformed(malformedLayer, message, context.version);
  if (oversized && !isRpc && message.byteLength < oversized.bytes) {
    const onion = peel(message, context.version);
    onion.transport.padding = "x".repeat(oversized.bytes);
    message = encoder.encode(JSON.stringify(onion.transport));
  }

  return on(faults.duplicate) ? [message, message] : [message];
}
