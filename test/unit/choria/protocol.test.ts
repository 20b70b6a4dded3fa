import { createHash, generateKeyPairSync, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { agentFilter } from "../../../lib/choria/filter";
import { decodeBase64OrRaw, decodeRequest, encodeReply, withinTtl } from "../../support/choria-node/protocol";
import { decodeReply, DISCOVERY_PING, encodeRequest, type OutgoingRequest, readTransportSender, replySubject, type RequestSigner } from "../../../lib/choria/protocol";
import { decodeStrictBase64 } from "../../../lib/crypto/encoding";
import { EnvelopeError } from "../../../lib/choria/errors";
import { PROTOCOL } from "../../../lib/choria/envelope";
import { InvalidInputError } from "../../../lib/errors";

// Test-only: mutating decoded envelope layers field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Layer = Record<string, any>;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const b64 = (value: string | Uint8Array) => Buffer.from(value).toString("base64");
const json = (value: unknown) => encoder.encode(JSON.stringify(value));

const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const v2Signer: RequestSigner = { version: 2, callerJwt: "caller.jwt.value", sign: (bytes) => sign(null, bytes, privateKey) };
const v1Signer: RequestSigner = { version: 1, kind: "insecure" };

const NOW_MS = 1_700_000_000_123;
const rpcBody = encoder.encode(JSON.stringify({ agent: "rpcutil", action: "inventory", data: {} }));

function request(signer: RequestSigner, overrides: Partial<OutgoingRequest> = {}): OutgoingRequest {
  const id = signer.version === 1 ? "a2f0ca717c694f2086cfa81b6c494648" : "2YBXZHqK6hRpIyZGJNPT6pRJhVP";
  return {
    id,
    senderId: "provisioner.example.net",
    callerId: "choria=provisioner.mcollective",
    collective: "provisioning",
    agent: "rpcutil",
    ttl: 60,
    timeMs: NOW_MS,
    filter: agentFilter("rpcutil"),
    payload: rpcBody,
    replyTo: replySubject("provisioning", "choria=provisioner.mcollective", id),
    signer,
    ...overrides,
  };
}

/** Peels an encoded message into plain objects so a test can mutate one layer and re-wrap it. */
function unwrap(bytes: Uint8Array) {
  const transport = JSON.parse(decoder.decode(bytes));
  const secure = JSON.parse(Buffer.from(transport.data, "base64").toString());
  return { transport, secure };
}

function v1Mutated(mutate: (inner: Layer, secure: Layer) => void): Uint8Array {
  const { transport, secure } = unwrap(encodeRequest(request(v1Signer)));
  const inner = JSON.parse(secure.message);
  mutate(inner, secure);
  secure.message = JSON.stringify(inner);
  return json({ ...transport, data: b64(JSON.stringify(secure)) });
}

function v2Mutated(mutate: (inner: Layer, secure: Layer) => void): Uint8Array {
  const { transport, secure } = unwrap(encodeRequest(request(v2Signer)));
  const inner = JSON.parse(Buffer.from(secure.request, "base64").toString());
  mutate(inner, secure);
  secure.request = b64(JSON.stringify(inner));
  return json({ ...transport, data: b64(JSON.stringify(secure)) });
}

describe("requests", () => {
  it.each([v1Signer, v2Signer])("round-trips a protocol v$version request through the server-side decoder", (signer) => {
    const outgoing = request(signer);

    const incoming = decodeRequest(encodeRequest(outgoing));

    expect(incoming).toEqual({
      version: signer.version,
      replyTo: outgoing.replyTo,
      transportSender: "provisioner.example.net",
      id: outgoing.id,
      senderId: "provisioner.example.net",
      callerId: "choria=provisioner.mcollective",
      collective: "provisioning",
      agent: "rpcutil",
      ttl: 60,
      timeSeconds: 1_700_000_000,
      filter: agentFilter("rpcutil"),
      payload: rpcBody,
    });
  });

  it("sends v1 RPC bodies as raw JSON text, and v2 bodies base64 encoded", () => {
    const v1 = unwrap(encodeRequest(request(v1Signer)));
    const v2 = unwrap(encodeRequest(request(v2Signer)));

    expect(JSON.parse(v1.secure.message).message).toBe(decoder.decode(rpcBody));
    expect(JSON.parse(Buffer.from(v2.secure.request, "base64").toString()).message).toBe(b64(rpcBody));
  });

  it("sends v1 insecure fillers and a verifiable v2 Ed25519 signature with the caller JWT", () => {
    const v1 = unwrap(encodeRequest(request(v1Signer)));
    const v2 = unwrap(encodeRequest(request(v2Signer)));

    expect([v1.secure.signature, v1.secure.pubcert]).toEqual(["insecure", "insecure"]);
    expect(v2.secure.caller).toBe("caller.jwt.value");
    expect(verify(null, Buffer.from(v2.secure.request, "base64"), publicKey, Buffer.from(v2.secure.signature, "base64"))).toBe(true);
  });

  it("sends v1 time in seconds and v2 time in nanoseconds", () => {
    const v1 = JSON.parse(unwrap(encodeRequest(request(v1Signer))).secure.message);
    const v2Text = Buffer.from(unwrap(encodeRequest(request(v2Signer))).secure.request, "base64").toString();

    expect(v1.envelope.time).toBe(1_700_000_000);
    expect(v2Text).toContain(`"time":1700000000123000000,`);
  });

  it.each([v1Signer, v2Signer])("delivers the discovery ping as `ping` after the server's base64 quirk (v$version)", (signer) => {
    const incoming = decodeRequest(encodeRequest(request(signer, { agent: "discovery", payload: DISCOVERY_PING })));

    expect(decoder.decode(incoming.payload)).toBe("ping");
  });

  describe("server-side schema rules", () => {
    it.each([31, 33])("drops a v1 requestid of %i characters", (length) => {
      const bytes = v1Mutated((inner) => (inner.envelope.requestid = "a".repeat(length)));

      expect(() => decodeRequest(bytes)).toThrow(/"requestid" must be exactly 32/);
    });

    it("drops a v1 ttl below 30 and accepts 30", () => {
      expect(() => decodeRequest(v1Mutated((inner) => (inner.envelope.ttl = 29)))).toThrow(/"ttl" must be at least 30/);
      expect(decodeRequest(v1Mutated((inner) => (inner.envelope.ttl = 30))).ttl).toBe(30);
    });

    it("drops a v2 ttl below 1", () => {
      expect(() => decodeRequest(v2Mutated((inner) => (inner.ttl = 0)))).toThrow(/"ttl" must be at least 1/);
    });

    it.each(["fact", "cf_class", "identity", "compound"])("drops a filter whose %s is missing or null", (key) => {
      expect(() => decodeRequest(v1Mutated((inner) => delete inner.envelope.filter[key]))).toThrow(new RegExp(`"${key}" must be an array`));
      expect(() => decodeRequest(v1Mutated((inner) => (inner.envelope.filter[key] = null)))).toThrow(EnvelopeError);
      expect(() => decodeRequest(v2Mutated((inner) => delete inner.filter[key]))).toThrow(new RegExp(`"${key}" must be an array`));
    });

    it("accepts a filter without agent, and a v2 request without any filter", () => {
      expect(decodeRequest(v1Mutated((inner) => delete inner.envelope.filter.agent)).filter.agent).toEqual([]);
      expect(decodeRequest(v2Mutated((inner) => delete inner.filter)).filter.agent).toEqual([]);
    });

    it.each(["signature", "pubcert"])("drops a v1 secure request with an empty %s", (key) => {
      expect(() => decodeRequest(v1Mutated((_inner, secure) => (secure[key] = "")))).toThrow(new RegExp(`"${key}" must not be empty`));
    });

    it.each(["signature", "caller"])("drops a v2 secure request with an empty %s", (key) => {
      expect(() => decodeRequest(v2Mutated((_inner, secure) => (secure[key] = "")))).toThrow(new RegExp(`"${key}" must not be empty`));
    });

    it.each([
      ["callerid", (inner: Layer) => (inner.envelope.callerid = "")],
      ["collective", (inner: Layer) => (inner.envelope.collective = "")],
      ["agent", (inner: Layer) => (inner.envelope.agent = "")],
      ["message", (inner: Layer) => (inner.message = "")],
      ["time", (inner: Layer) => (inner.envelope.time = "1700000000")],
    ])("drops a v1 request with a bad %s", (key, mutate) => {
      expect(() => decodeRequest(v1Mutated(mutate))).toThrow(new RegExp(`"${key}"`));
    });

    it.each([
      ["sender", (inner: Layer) => (inner.sender = "")],
      ["caller", (inner: Layer) => (inner.caller = "")],
      ["id", (inner: Layer) => (inner.id = "")],
      ["message", (inner: Layer) => (inner.message = "")],
      ["time", (inner: Layer) => (inner.time = 0)],
    ])("drops a v2 request with a bad %s", (key, mutate) => {
      expect(() => decodeRequest(v2Mutated(mutate))).toThrow(new RegExp(`"${key}"`));
    });

    it("drops a request whose inner protocol does not match the transport version", () => {
      expect(() => decodeRequest(v1Mutated((inner) => (inner.protocol = PROTOCOL[2].request)))).toThrow(/unexpected protocol/);
    });
  });
});

describe("the base64-or-raw payload quirk", () => {
  it("decodes strictly padded standard base64 and uses everything else raw", () => {
    expect(decoder.decode(decodeBase64OrRaw(encoder.encode("cGluZw==")))).toBe("ping");
    expect(decodeBase64OrRaw(encoder.encode("ping"))).toEqual(new Uint8Array(Buffer.from("ping", "base64")));
    expect(decoder.decode(decodeBase64OrRaw(rpcBody))).toBe(decoder.decode(rpcBody));
    expect(decoder.decode(decodeBase64OrRaw(encoder.encode("abc")))).toBe("abc");
  });

  it("rejects unpadded, url-safe and misplaced-padding base64", () => {
    expect(decodeStrictBase64("cGluZw")).toBeUndefined();
    expect(decodeStrictBase64("-_-_")).toBeUndefined();
    expect(decodeStrictBase64("cG=uZw==")).toBeUndefined();
    expect(decodeStrictBase64("cGlu")).toEqual(encoder.encode("pin"));
  });
});

describe("replies", () => {
  const payload = encoder.encode(JSON.stringify({ action: "inventory", statuscode: 0, statusmsg: "OK", data: {} }));

  it.each([1, 2] as const)("round-trips a protocol v%i reply through the client-side decoder", (version) => {
    const bytes = encodeReply({ version, requestId: "req-1", senderId: "node1.example.net", agent: "rpcutil", timeMs: NOW_MS, payload });

    expect(decodeReply(bytes)).toEqual({
      version,
      transportSender: "node1.example.net",
      requestId: "req-1",
      senderId: "node1.example.net",
      agent: "rpcutil",
      timeSeconds: 1_700_000_000,
      payload,
    });
    expect(readTransportSender(bytes)).toBe("node1.example.net");
  });

  it("hashes v1 over the message text and v2 over the reply bytes", () => {
    const v1 = unwrap(encodeReply({ version: 1, requestId: "r", senderId: "n", agent: "a", timeMs: NOW_MS, payload }));
    const v2 = unwrap(encodeReply({ version: 2, requestId: "r", senderId: "n", agent: "a", timeMs: NOW_MS, payload }));

    expect(v1.secure.hash).toBe(createHash("sha256").update(v1.secure.message).digest("base64"));
    expect(v2.secure.hash).toBe(createHash("sha256").update(Buffer.from(v2.secure.reply, "base64")).digest("base64"));
  });

  it.each([1, 2] as const)("rejects a v%i reply whose hash does not match", (version) => {
    const { transport, secure } = unwrap(encodeReply({ version, requestId: "r", senderId: "n", agent: "a", timeMs: NOW_MS, payload }));
    if (version === 1) secure.message = secure.message.replace('"agent":"a"', '"agent":"b"');
    else secure.reply = b64(Buffer.from(secure.reply, "base64").toString().replace('"agent":"a"', '"agent":"b"'));

    expect(() => decodeReply(json({ ...transport, data: b64(JSON.stringify(secure)) }))).toThrow(/hash does not match/);
  });

  it("rejects an oversized message before parsing it", () => {
    const bytes = encodeReply({ version: 1, requestId: "r", senderId: "n", agent: "a", timeMs: NOW_MS, payload });

    expect(() => decodeReply(bytes, bytes.byteLength - 1)).toThrow(/exceeds the \d+ byte limit/);
    expect(decodeReply(bytes, bytes.byteLength).senderId).toBe("n");
  });

  it.each([
    ["transport", encoder.encode("not json")],
    ["transport", json({ protocol: "choria:transport:9", data: "" })],
    ["transport", json({ protocol: PROTOCOL[1].transport, data: "%%%" })],
    ["secure reply", json({ protocol: PROTOCOL[1].transport, data: b64("[]") })],
    ["secure reply", json({ protocol: PROTOCOL[1].transport, data: b64(JSON.stringify({ protocol: PROTOCOL[2].secureReply })) })],
    ["reply", json({ protocol: PROTOCOL[1].transport, data: b64(JSON.stringify({ protocol: PROTOCOL[1].secureReply, message: "{", hash: createHash("sha256").update("{").digest("base64") })) })],
  ])("names the %s layer when it is malformed", (layer, bytes) => {
    const error = (() => {
      try {
        decodeReply(bytes);
      } catch (caught) {
        return caught;
      }
    })();

    expect(error).toBeInstanceOf(EnvelopeError);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as EnvelopeError).layer).toBe(layer);
  });
});

describe("subjects", () => {
  it("builds the reply subject from the md5 of the callerid and the request id", () => {
    const md5 = createHash("md5").update("choria=x").digest("hex");

    expect(replySubject("provisioning", "choria=x", "id1")).toBe(`provisioning.reply.${md5}.id1`);
  });
});

describe("the TTL rule", () => {
  it("accepts strictly inside now - ttl .. now + ttl", () => {
    const nowMs = 1_000_000_999;
    const at = (timeSeconds: number) => withinTtl({ ttl: 60, timeSeconds }, nowMs);

    expect([at(1_000_000 - 60), at(1_000_000 - 59), at(1_000_000), at(1_000_000 + 59), at(1_000_000 + 60)]).toEqual([
      false,
      true,
      true,
      true,
      false,
    ]);
  });
});
