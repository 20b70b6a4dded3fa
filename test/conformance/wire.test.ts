/**
 * Our codec against the byte-exact examples in generated/wire-examples.json: every example decodes,
 * and re-encoding its decoded fields reproduces the example byte for byte once the informational
 * `seen-by` (v1) / `trace` (v2) hop header that Go's connector appends at publish time is removed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generateKeyPairSync, sign } from "node:crypto";
import { describe, expect, it } from "vitest";
import { agentFilter } from "../../lib/choria/filter";
import { decodeReply, encodeRequest, replySubject, type RequestSigner } from "../../lib/choria/protocol";
import { decodeRequest, encodeReply } from "../support/choria-node/protocol";

// The upstream Choria fixtures (shared/fixtures/choria, next to this repository).
const FIXTURES = join(__dirname, "..", "..", "..", "shared", "fixtures", "choria");
const fixtureText = (...path: string[]) => readFileSync(join(FIXTURES, ...path), "utf8");
const fixtureJson = <T = Record<string, unknown>>(...path: string[]) => JSON.parse(fixtureText(...path)) as T;

interface Example {
  subject: string;
  nats_payload: string;
  layers: Record<string, Record<string, unknown> & { headers?: Record<string, unknown> }>;
  expected_hash?: string;
}

const examples = fixtureJson<Record<string, Example>>("generated", "wire-examples.json");
const example = (name: string) => {
  const found = examples[name];
  if (!found) throw new Error(`wire-examples.json has no ${name}`);
  return found;
};
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The example's transport JSON without the hop-tracking header our publisher does not add. */
function withoutHopHeader(payload: string): string {
  const transport = JSON.parse(payload);
  delete transport.headers["seen-by"];
  delete transport.headers.trace;
  return JSON.stringify(transport);
}

// The v2 example carries placeholders instead of a signature and caller JWT (its generator could not
// sign). Before decoding we substitute a real Ed25519 signature over the example's exact request
// bytes and a stand-in JWT, exactly what our v2 signer produces for the same request.
const { privateKey } = generateKeyPairSync("ed25519");
const CALLER_JWT = "eyJhbGciOiJFZERTQSJ9.eyJjYWxsZXJpZCI6ImNob3JpYT1wcm92aXNpb25lcl9zaWduZXIifQ.c2lnbmF0dXJl";
const v2Signer = { version: 2, callerJwt: CALLER_JWT, sign: (bytes: Uint8Array) => sign(null, bytes, privateKey) } satisfies RequestSigner;

function substituteV2Placeholders(payload: string): string {
  const transport = JSON.parse(payload);
  const secure = JSON.parse(Buffer.from(transport.data, "base64").toString("utf8"));
  const requestBytes = Buffer.from(secure.request, "base64");
  secure.signature = Buffer.from(v2Signer.sign(requestBytes)).toString("base64");
  secure.caller = CALLER_JWT;
  transport.data = Buffer.from(JSON.stringify(secure)).toString("base64");
  return JSON.stringify(transport);
}

function v1Envelope(name: string): Record<string, unknown> {
  return example(name).layers.request!.envelope as Record<string, unknown>;
}

describe("v1 requests", () => {
  it.each([
    ["v1_direct_request_rpcutil_inventory", "rpcutil"],
    ["v1_discovery_request", "discovery"],
  ])("%s decodes and re-encodes byte for byte", (name, agent) => {
    const { nats_payload, layers, subject } = example(name);
    const envelope = v1Envelope(name);

    const incoming = decodeRequest(encoder.encode(nats_payload));
    const reencoded = encodeRequest({
      id: incoming.id,
      senderId: incoming.senderId,
      callerId: incoming.callerId,
      collective: incoming.collective,
      agent: incoming.agent,
      ttl: incoming.ttl,
      timeMs: incoming.timeSeconds * 1000,
      filter: incoming.filter,
      payload: encoder.encode(layers.request!.message as string),
      replyTo: incoming.replyTo,
      signer: { version: 1, kind: "insecure" },
    });

    expect(incoming).toMatchObject({
      version: 1,
      id: envelope.requestid,
      senderId: envelope.senderid,
      callerId: envelope.callerid,
      collective: "provisioning",
      agent,
      ttl: envelope.ttl,
      timeSeconds: envelope.time,
      filter: envelope.filter,
      transportSender: layers.transport!.headers!.mc_sender,
      replyTo: layers.transport!.headers!["reply-to"],
    });
    expect(incoming.replyTo).toBe(replySubject("provisioning", incoming.callerId, incoming.id));
    expect(subject).toBe(agent === "discovery" ? "provisioning.broadcast.agent.discovery" : "provisioning.node.ginkgo.example.net");
    expect(decoder.decode(reencoded)).toBe(withoutHopHeader(nats_payload));
  });

  it("the discovery ping reaches the agent as `ping` and filters on choria_provision", () => {
    const incoming = decodeRequest(encoder.encode(example("v1_discovery_request").nats_payload));

    expect(decoder.decode(incoming.payload)).toBe("ping");
    expect(incoming.filter).toEqual(agentFilter("choria_provision"));
  });
});

describe("v1 replies", () => {
  it.each(["v1_reply_rpcutil_inventory", "v1_discovery_reply"])("%s decodes, verifies its hash and re-encodes byte for byte", (name) => {
    const { nats_payload, layers, expected_hash } = example(name);

    const reply = decodeReply(encoder.encode(nats_payload));
    const reencoded = encodeReply({
      version: 1,
      requestId: reply.requestId,
      senderId: reply.senderId,
      agent: reply.agent,
      timeMs: reply.timeSeconds * 1000,
      payload: reply.payload,
    });

    const envelope = layers.reply!.envelope as Record<string, unknown>;
    expect(reply).toMatchObject({ version: 1, requestId: envelope.requestid, senderId: envelope.senderid, agent: envelope.agent, timeSeconds: envelope.time });
    expect(reply.transportSender).toBe(layers.transport!.headers!.mc_sender);
    expect(decoder.decode(reply.payload)).toBe(layers.reply!.message);
    expect(layers.secure_reply!.hash).toBe(expected_hash);
    expect(decoder.decode(reencoded)).toBe(withoutHopHeader(nats_payload));
  });

  it("the inventory reply body carries what the provisioner reads", () => {
    const reply = decodeReply(encoder.encode(example("v1_reply_rpcutil_inventory").nats_payload));

    expect(JSON.parse(decoder.decode(reply.payload))).toEqual(example("v1_reply_rpcutil_inventory").layers.rpc_reply);
  });
});

describe("v2", () => {
  it("the direct choria_provision#jwt request decodes (placeholders substituted) and re-encodes byte for byte", () => {
    const { nats_payload, layers } = example("v2_direct_request_choria_provision_jwt");
    const substituted = substituteV2Placeholders(nats_payload);
    const requestText = layers.request_json_text as unknown as string;
    const request = JSON.parse(requestText);

    const incoming = decodeRequest(encoder.encode(substituted));
    const reencoded = encodeRequest({
      id: incoming.id,
      senderId: incoming.senderId,
      callerId: incoming.callerId,
      collective: incoming.collective,
      agent: incoming.agent,
      ttl: incoming.ttl,
      timeMs: 0,
      // JSON numbers lose nanosecond precision; the exact digits come from the request text.
      timeNs: BigInt(/"time":(\d+)/.exec(requestText)![1]!),
      filter: incoming.filter,
      payload: incoming.payload,
      replyTo: incoming.replyTo,
      signer: v2Signer,
    });

    expect(incoming).toMatchObject({
      version: 2,
      id: request.id,
      senderId: request.sender,
      callerId: request.caller,
      collective: "provisioning",
      agent: "choria_provision",
      ttl: 60,
      filter: request.filter,
      replyTo: layers.transport!.headers!.reply,
      transportSender: layers.transport!.headers!.sender,
    });
    expect(incoming.replyTo).toBe(replySubject("provisioning", incoming.callerId, incoming.id));
    expect(JSON.parse(decoder.decode(incoming.payload))).toEqual(layers.rpc_request);
    expect(decoder.decode(reencoded)).toBe(withoutHopHeader(substituted));
  });

  it("the choria_provision#jwt reply decodes, verifies its hash and re-encodes byte for byte", () => {
    const { nats_payload, layers, expected_hash } = example("v2_reply_choria_provision_jwt");
    const replyText = layers.reply_json_text as unknown as string;

    const reply = decodeReply(encoder.encode(nats_payload));
    const reencoded = encodeReply({
      version: 2,
      requestId: reply.requestId,
      senderId: reply.senderId,
      agent: reply.agent,
      timeMs: 0,
      timeNs: BigInt(/"time":(\d+)/.exec(replyText)![1]!),
      payload: reply.payload,
    });

    expect(reply).toMatchObject({ version: 2, senderId: "ginkgo.example.net", transportSender: "ginkgo.example.net", agent: "choria_provision" });
    expect(JSON.parse(decoder.decode(reply.payload))).toEqual(layers.rpc_reply);
    expect(layers.secure_reply!.hash).toBe(expected_hash);
    expect(decoder.decode(reencoded)).toBe(withoutHopHeader(nats_payload));
  });

  it("reply subjects use the md5 vectors of crypto-vectors.json", () => {
    const vectors = fixtureJson<{ reply_subject_md5: Record<string, string> }>("generated", "crypto-vectors.json").reply_subject_md5;

    for (const [callerId, md5] of Object.entries(vectors)) {
      expect(replySubject("provisioning", callerId, "id")).toBe(`provisioning.reply.${md5}.id`);
    }
  });
});
