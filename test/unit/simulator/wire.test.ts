import { describe, expect, it } from "vitest";
import { decodeReply } from "../../../lib/choria/protocol";
import type { ProtocolVersion } from "../../../lib/choria/envelope";
import { encodeNodeReplies } from "../../../dev/simulator";
import type { NodeFaults } from "../../../dev/simulator/faults";

const REQUEST_ID = "0123456789abcdef0123456789abcdef";
const reply = {
  agent: "rpcutil",
  action: "inventory",
  payload: new TextEncoder().encode(JSON.stringify({ action: "inventory", statuscode: 0, statusmsg: "OK", data: {} })),
};

function encode(faults: NodeFaults, version: ProtocolVersion = 1): Uint8Array[] {
  return encodeNodeReplies(reply, { identity: "node1.example.net", version, requestId: REQUEST_ID, nowMs: Date.UTC(2026, 0, 1) }, faults);
}

describe.each([1, 2] as const)("encodeNodeReplies, protocol v%i", (version) => {
  it("encodes an honest reply the codec accepts", () => {
    const [message] = encode({}, version);

    const decoded = decodeReply(message as Uint8Array);

    expect(decoded).toMatchObject({ version, transportSender: "node1.example.net", senderId: "node1.example.net", requestId: REQUEST_ID });
    expect(JSON.parse(new TextDecoder().decode(decoded.payload))).toMatchObject({ statuscode: 0 });
  });

  it("puts the faulted senders and request id into the right places", () => {
    const [transportOnly] = encode({ wrongSender: { transport: "impostor.example.net" } }, version);
    const [envelopeOnly] = encode({ wrongSender: { envelope: "impostor.example.net" } }, version);
    const [foreign] = encode({ foreignRequestId: true }, version);

    expect(decodeReply(transportOnly as Uint8Array)).toMatchObject({ transportSender: "impostor.example.net", senderId: "node1.example.net" });
    expect(decodeReply(envelopeOnly as Uint8Array)).toMatchObject({ transportSender: "node1.example.net", senderId: "impostor.example.net" });
    expect(decodeReply(foreign as Uint8Array).requestId).not.toBe(REQUEST_ID);
  });

  it("breaks the hash and each layer so the codec names the layer", () => {
    const [badHash] = encode({ badHash: true }, version);
    const layers = (["transport", "secure", "reply"] as const).map((layer) => encode({ malformed: { layer } }, version)[0] as Uint8Array);
    const [mcorpc] = encode({ malformed: { layer: "mcorpc" } }, version);

    expect(() => decodeReply(badHash as Uint8Array)).toThrow("invalid secure reply: hash does not match the reply");
    expect(() => decodeReply(layers[0] as Uint8Array)).toThrow(/invalid transport/);
    expect(() => decodeReply(layers[1] as Uint8Array)).toThrow(/invalid secure reply/);
    expect(() => decodeReply(layers[2] as Uint8Array)).toThrow(/invalid reply/);
    expect(() => JSON.parse(new TextDecoder().decode(decodeReply(mcorpc as Uint8Array).payload))).toThrow();
  });

  it("pads oversized replies and duplicates on request, only for the selected actions", () => {
    const [big] = encode({ oversized: { bytes: 100_000 } }, version);
    const twice = encode({ duplicate: ["rpcutil#inventory"] }, version);
    const once = encode({ duplicate: ["jwt"] }, version);

    expect(big?.byteLength).toBeGreaterThan(100_000);
    expect(twice).toHaveLength(2);
    expect(once).toHaveLength(1);
  });
});
