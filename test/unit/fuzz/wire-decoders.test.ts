/**
 * Property fuzzing of every decoder that reads Choria bytes from the network: whatever arrives,
 * the decoder either returns a value or throws the module's named error (EnvelopeError, an
 * InvalidInputError), never a TypeError, RangeError or a hang, and nothing it accepts as a node
 * identity can widen a NATS subject. Runs are bounded and seeded so a failure replays exactly.
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { agentFilter } from "../../../lib/choria/filter";
import { parseFilter } from "../../support/choria-node/filter";
import { identityProblem } from "../../../lib/choria/identity";
import { buildLifecycleEvent, encodeLifecycleEvent, parseLifecycleEvent } from "../../../lib/choria/lifecycle";
import { LIFECYCLE_TYPES } from "../../support/choria-node/lifecycle-types";
import { decodeReply, encodeRequest, readTransportSender } from "../../../lib/choria/protocol";
import { decodeRequest, encodeReply } from "../../support/choria-node/protocol";
import { EnvelopeError } from "../../../lib/choria/errors";
import { PROTOCOL, type ProtocolVersion } from "../../../lib/choria/envelope";
import { InvalidInputError } from "../../../lib/errors";
import { recordScenario } from "../../support/chaos/scenario";
import { FUZZ_RUNS, FUZZ_SEED, expectOnly, mutatedBytes } from "./support";

const encoder = new TextEncoder();
const json = (value: unknown) => encoder.encode(JSON.stringify(value));
const base64 = (bytes: Uint8Array | string) => Buffer.from(typeof bytes === "string" ? encoder.encode(bytes) : bytes).toString("base64");

const versionArb = fc.constantFrom<ProtocolVersion>(1, 2);
/** Names a hostile node might claim: wildcards, empty tokens, whitespace, control characters, long. */
const hostileName = fc.oneof(
  fc.constantFrom("*", ">", "a.*", "a.>", ".", "..", "a..b", ".a", "a.", " ", "a b", "a\tb", "a\r\nPUB x 1", "\u0000", "x".repeat(300), ""),
  fc.string({ maxLength: 40 }),
  fc.stringMatching(/^[a-z0-9.*> -]{1,20}$/),
);
const nameArb = fc.oneof(fc.constant("node1.example.net"), hostileName);

/** Any JSON value, or a value of the expected kind, for one envelope field. */
const fieldArb = (expected: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: expected }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });

function validReply(version: ProtocolVersion, sender: string, payload: Uint8Array): Uint8Array {
  return encodeReply({ version, requestId: "0123456789abcdef0123456789abcdef", senderId: sender, agent: "choria_provision", timeMs: 1_700_000_000_000, payload });
}

function validRequest(version: ProtocolVersion, sender: string, payload: Uint8Array): Uint8Array {
  return encodeRequest({
    id: "0123456789abcdef0123456789abcdef",
    senderId: sender,
    callerId: "choria=provisioner",
    collective: "provisioning",
    agent: "choria_provision",
    ttl: 60,
    timeMs: 1_700_000_000_000,
    filter: agentFilter("choria_provision"),
    payload,
    replyTo: "provisioning.reply.x.y",
    signer: version === 1 ? { version: 1, kind: "insecure" } : { version: 2, callerJwt: "a.b.c", sign: () => new Uint8Array([1, 2, 3]) },
  });
}

/** A transport whose inner layers are each either well-formed or arbitrary JSON, layer by layer. */
const layeredReplyArb = fc
  .record({
    version: versionArb,
    transportProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].transport, PROTOCOL[2].transport)),
    headers: fieldArb(fc.record({ mc_sender: nameArb, sender: nameArb })),
    secureProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].secureReply, PROTOCOL[2].secureReply)),
    replyProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].reply, PROTOCOL[2].reply)),
    sender: fieldArb(nameArb),
    requestId: fieldArb(fc.string({ maxLength: 40 })),
    time: fieldArb(fc.oneof(fc.integer(), fc.double())),
    message: fieldArb(fc.string({ maxLength: 60 })),
    correctHash: fc.boolean(),
    dataIsBase64: fc.boolean(),
  })
  .map((shape) => {
    const reply =
      shape.version === 1
        ? { protocol: shape.replyProtocol, message: shape.message, envelope: { requestid: shape.requestId, senderid: shape.sender, agent: "a", time: shape.time } }
        : { protocol: shape.replyProtocol, message: shape.message, request: shape.requestId, sender: shape.sender, agent: "a", time: shape.time };
    const replyText = JSON.stringify(reply);
    const hash = shape.correctHash ? createHash("sha256").update(replyText).digest("base64") : "AAAA";
    const secure = shape.version === 1 ? { protocol: shape.secureProtocol, message: replyText, hash } : { protocol: shape.secureProtocol, reply: base64(replyText), hash };
    const secureText = JSON.stringify(secure);
    return json({ protocol: shape.transportProtocol, data: shape.dataIsBase64 ? base64(secureText) : secureText, headers: shape.headers });
  });

const layeredRequestArb = fc
  .record({
    version: versionArb,
    transportProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].transport, PROTOCOL[2].transport)),
    headers: fieldArb(fc.record({ "reply-to": fc.string(), reply: fc.string(), mc_sender: nameArb, sender: nameArb })),
    secureProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].secureRequest, PROTOCOL[2].secureRequest)),
    requestProtocol: fieldArb(fc.constantFrom(PROTOCOL[1].request, PROTOCOL[2].request)),
    id: fieldArb(fc.oneof(fc.constant("0123456789abcdef0123456789abcdef"), fc.string({ maxLength: 40 }))),
    ttl: fieldArb(fc.integer({ min: -5, max: 120 })),
    time: fieldArb(fc.integer({ min: 0 })),
    filter: fieldArb(
      fc.record({
        fact: fieldArb(fc.array(fc.record({ fact: fc.string(), operator: fc.string(), value: fc.string() }), { maxLength: 2 })),
        cf_class: fieldArb(fc.array(fc.string(), { maxLength: 2 })),
        agent: fieldArb(fc.array(fc.string(), { maxLength: 2 })),
        identity: fieldArb(fc.array(nameArb, { maxLength: 2 })),
        compound: fieldArb(fc.array(fc.array(fc.object({ maxDepth: 1 }), { maxLength: 2 }), { maxLength: 2 })),
      }),
    ),
    message: fieldArb(fc.string({ maxLength: 60 })),
  })
  .map((shape) => {
    const request =
      shape.version === 1
        ? {
            protocol: shape.requestProtocol,
            message: shape.message,
            envelope: { requestid: shape.id, senderid: "p", callerid: "c", collective: "provisioning", agent: "rpcutil", ttl: shape.ttl, time: shape.time, filter: shape.filter },
          }
        : {
            protocol: shape.requestProtocol,
            message: typeof shape.message === "string" ? base64(shape.message) : shape.message,
            id: shape.id,
            sender: "p",
            caller: "c",
            collective: "provisioning",
            agent: "rpcutil",
            ttl: shape.ttl,
            time: shape.time,
            filter: shape.filter,
          };
    const requestText = JSON.stringify(request);
    const secure =
      shape.version === 1
        ? { protocol: shape.secureProtocol, message: requestText, signature: "insecure", pubcert: "insecure" }
        : { protocol: shape.secureProtocol, request: base64(requestText), signature: "AQID", caller: "a.b.c" };
    return json({ protocol: shape.transportProtocol, data: base64(JSON.stringify(secure)), headers: shape.headers });
  });

const anyBytes = fc.oneof(fc.uint8Array({ maxLength: 256 }), fc.string({ maxLength: 200 }).map((text) => encoder.encode(text)), fc.jsonValue({ maxDepth: 3 }).map(json));

describe("fuzz: Choria envelope decoders", () => {
  it("decodeReply throws only EnvelopeError on arbitrary, mutated and layer-broken replies", ({ task }) => {
    // Arrange
    const inputs = fc.oneof(
      anyBytes,
      layeredReplyArb,
      fc.tuple(versionArb, nameArb, fc.uint8Array({ maxLength: 64 })).chain(([version, sender, payload]) => mutatedBytes(validReply(version, sender, payload))),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (bytes) => {
        tried += 1;
        expectOnly(() => decodeReply(bytes), [EnvelopeError]);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("decodeReply rejects a message over the size limit before parsing it", () => {
    // Arrange
    const oversized = validReply(1, "node1.example.net", new Uint8Array(2048).fill(65));

    // Act / Assert
    expect(() => decodeReply(oversized, 1024)).toThrow(EnvelopeError);
    expect(() => decodeReply(oversized, 1024)).toThrow(/exceeds the 1024 byte limit/);
  });

  it("decodeRequest throws only EnvelopeError on arbitrary, mutated and layer-broken requests", ({ task }) => {
    // Arrange
    const inputs = fc.oneof(
      anyBytes,
      layeredRequestArb,
      fc.tuple(versionArb, fc.uint8Array({ minLength: 1, maxLength: 64 })).chain(([version, payload]) => mutatedBytes(validRequest(version, "p", payload))),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (bytes) => {
        tried += 1;
        expectOnly(() => decodeRequest(bytes), [EnvelopeError]);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("readTransportSender throws only EnvelopeError and returns a string", ({ task }) => {
    // Arrange
    const inputs = fc.oneof(anyBytes, layeredReplyArb, fc.tuple(versionArb, nameArb).chain(([version, sender]) => mutatedBytes(validReply(version, sender, new Uint8Array(0)))));
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (bytes) => {
        tried += 1;
        const sender = expectOnly(() => readTransportSender(bytes), [EnvelopeError]);
        if (sender !== undefined) expect(typeof sender).toBe("string");
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("parseFilter throws only EnvelopeError and returns arrays of the declared kinds", ({ task }) => {
    // Arrange
    const inputs = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }),
      fc.record({
        fact: fieldArb(fc.array(fieldArb(fc.record({ fact: fc.string(), operator: fc.string(), value: fc.string() })), { maxLength: 3 })),
        cf_class: fieldArb(fc.array(fieldArb(fc.string()), { maxLength: 3 })),
        agent: fieldArb(fc.array(fieldArb(fc.string()), { maxLength: 3 })),
        identity: fieldArb(fc.array(fieldArb(nameArb), { maxLength: 3 })),
        compound: fieldArb(fc.array(fieldArb(fc.array(fc.jsonValue({ maxDepth: 1 }))), { maxLength: 3 })),
      }),
      fc.constant(undefined),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, fc.boolean(), (value, required) => {
        tried += 1;
        const filter = expectOnly(() => parseFilter(value, required), [EnvelopeError]);
        if (filter === undefined) return;
        for (const key of ["cf_class", "agent", "identity"] as const) expect(filter[key].every((entry) => typeof entry === "string")).toBe(true);
        expect(Array.isArray(filter.fact) && Array.isArray(filter.compound)).toBe(true);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });
});

const lifecycleTypeArb = fc.constantFrom(...LIFECYCLE_TYPES);

const lifecycleArb = fc
  .record({
    type: lifecycleTypeArb,
    identity: nameArb,
    component: fieldArb(fc.constantFrom("provision_mode_server", "")),
    timestamp: fieldArb(fc.oneof(fc.integer({ min: -10, max: 2_000_000_000 }), fc.double())),
    version: fieldArb(fc.string({ maxLength: 10 })),
    sequence: fieldArb(fc.integer({ min: -2, max: 10 })),
    cloudevents: fc.boolean(),
    ceTypeMatches: fc.boolean(),
    specversion: fieldArb(fc.constant("1.0")),
  })
  .map((shape) => {
    const data: Record<string, unknown> = {
      protocol: `io.choria.lifecycle.v1.${shape.type}`,
      id: "01e72410-d734-4611-9485-8c6a2dd2579b",
      identity: shape.identity,
      component: shape.component,
      timestamp: shape.timestamp,
      version: shape.version,
      governor: "g",
      sequence: shape.sequence,
      event_type: "enter",
    };
    if (!shape.cloudevents) return json(data);
    return json({
      specversion: shape.specversion,
      id: data.id,
      source: "io.choria.lifecycle",
      type: shape.ceTypeMatches ? data.protocol : "io.choria.lifecycle.v1.alive",
      subject: shape.identity,
      data,
    });
  });

describe("fuzz: lifecycle events", () => {
  it("parseLifecycleEvent throws only InvalidInputError and never accepts a wildcard identity", ({ task }) => {
    // Arrange
    const valid = fc
      .tuple(lifecycleTypeArb, fc.constantFrom<"choria" | "cloudevents">("choria", "cloudevents"), nameArb)
      .map(([type, format, identity]) => encodeLifecycleEvent(buildLifecycleEvent({ type, identity, component: "c", timestampMs: 1_700_000_000_000 }), format));
    const inputs = fc.oneof(anyBytes, lifecycleArb, valid, valid.chain((bytes) => mutatedBytes(bytes)));
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (bytes) => {
        tried += 1;
        const event = expectOnly(() => parseLifecycleEvent(bytes), [InvalidInputError]);
        if (event !== undefined) expect(identityProblem(event.identity)).toBeUndefined();
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("names the identity field when a lifecycle event carries a subject wildcard", () => {
    // Arrange
    const bad = ["*", ">", "a.*.b", "a..b", ".a", "a b"];

    // Act
    const messages = bad.map((identity) => {
      try {
        parseLifecycleEvent(encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component: "c", timestampMs: 1_700_000_000_000 }), "cloudevents"));
        return "accepted";
      } catch (error) {
        return error instanceof InvalidInputError ? error.message : `unexpected ${String(error)}`;
      }
    });

    // Assert
    for (const message of messages) expect(message).toMatch(/^invalid lifecycle event: "data\.identity" /);
  });
});
