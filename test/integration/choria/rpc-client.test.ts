import { createHash } from "node:crypto";
import { connect, type NatsConnection } from "nats";
import { afterEach, describe, expect, it } from "vitest";
import { PROTOCOL } from "../../../lib/choria/envelope";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { InvalidInputError, RpcProtocolError, RpcStatusError, RpcTimeoutError } from "../../../lib/errors";
import { clientSettings, encoder, mcorpcReply, replyTo, respond } from "./support";
import { brokerForSuite, rejectionOf } from "../../support/suite";

const NODE = "node1.example.net";
const b64 = (value: string | Uint8Array) => Buffer.from(value).toString("base64");

const broker = brokerForSuite();
const responders: NatsConnection[] = [];

afterEach(async () => {
  await Promise.all(responders.splice(0).map((nc) => nc.close()));
});

async function node(answer: Parameters<typeof respond>[2], identity = NODE) {
  const responder = await respond(broker.nats.url, `provisioning.node.${identity}`, answer);
  responders.push(responder.nc);
  return responder;
}

const inventoryCall = (timeoutMs = 2_000) => ({ identity: NODE, agent: "rpcutil", action: "inventory", data: {}, timeoutMs });

describe.each([1, 2] as const)("NatsChoriaRpc over protocol v%i", (version) => {
  const rpc = () => new NatsChoriaRpc(broker.nc, clientSettings(version));

  it("sends a schema-valid direct request and returns the target's OK reply", async () => {
    const responder = await node((request) => [replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", { version: "0.30.0" }))]);

    const reply = await rpc().call({ ...inventoryCall(), agent: "choria_provision", action: "jwt", data: { token: "t0ken" } });

    expect(reply).toEqual({ sender: NODE, statuscode: 0, statusmsg: "OK", data: { version: "0.30.0" } });
    const [request] = responder.requests;
    expect(request).toMatchObject({
      version,
      agent: "choria_provision",
      collective: "provisioning",
      callerId: "choria=provisioner.mcollective",
      senderId: "provisioner.test.local",
      transportSender: "provisioner.test.local",
      ttl: 30,
      filter: { fact: [], cf_class: [], agent: ["choria_provision"], identity: [], compound: [] },
    });
    expect(request?.id).toHaveLength(version === 1 ? 32 : 27);
    const md5 = createHash("md5").update("choria=provisioner.mcollective").digest("hex");
    expect(request?.replyTo).toBe(`provisioning.reply.${md5}.${request?.id}`);
    expect(JSON.parse(new TextDecoder().decode(request?.payload))).toEqual({ agent: "choria_provision", action: "jwt", data: { token: "t0ken" } });
  });

  it("turns a non-zero status into RpcStatusError", async () => {
    await node((request) => [replyTo(request, NODE, mcorpcReply("jwt", 1, "Incorrect provision token", {}))]);

    const error = await rejectionOf(rpc().call(inventoryCall()));

    expect(error).toBeInstanceOf(RpcStatusError);
    expect(error).toMatchObject({ identity: NODE, rpc: "rpcutil#inventory", sender: NODE, statuscode: 1, statusmsg: "Incorrect provision token" });
  });

  it("times out with RpcTimeoutError when nobody answers", async () => {
    const error = await rejectionOf(rpc().call(inventoryCall(200)));

    expect(error).toBeInstanceOf(RpcTimeoutError);
    expect(error.message).toContain(NODE);
  });

  it("ignores a reply from another sender and reports it when the target stays silent", async () => {
    await node((request) => [replyTo(request, "intruder.example.net", mcorpcReply("inventory", 0, "OK", {}))]);

    const error = await rejectionOf(rpc().call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toContain('"intruder.example.net"');
  });

  it("keeps waiting past a foreign reply for the target's own reply", async () => {
    await node((request) => [
      replyTo(request, "intruder.example.net", mcorpcReply("inventory", 0, "OK", { from: "intruder" })),
      replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", { from: "target" })),
    ]);

    const reply = await rpc().call(inventoryCall());

    expect(reply.data).toEqual({ from: "target" });
  });

  it("rejects a reply whose envelope sender differs from its transport header", async () => {
    await node((request) => {
      const forged = JSON.parse(new TextDecoder().decode(replyTo(request, "intruder.example.net", mcorpcReply("inventory", 0, "OK", {}))));
      forged.headers[version === 1 ? "mc_sender" : "sender"] = NODE;
      return [encoder.encode(JSON.stringify(forged))];
    });

    const error = await rejectionOf(rpc().call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toMatch(/envelope names unexpected sender "intruder\.example\.net"/);
  });

  it("rejects a reply carrying another request id", async () => {
    await node((request) => [replyTo({ ...request, id: request.id.replace(/^./, (c) => (c === "a" ? "b" : "a")) }, NODE, mcorpcReply("inventory", 0, "OK", {}))]);

    const error = await rejectionOf(rpc().call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toContain("for another request");
  });

  it("rejects a reply whose hash does not match", async () => {
    await node((request) => {
      const transport = JSON.parse(new TextDecoder().decode(replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", {}))));
      const secure = JSON.parse(Buffer.from(transport.data, "base64").toString());
      secure.hash = b64(createHash("sha256").update("something else").digest());
      transport.data = b64(JSON.stringify(secure));
      return [encoder.encode(JSON.stringify(transport))];
    });

    const error = await rejectionOf(rpc().call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toContain("hash does not match");
  });

  it("rejects an oversized reply", async () => {
    await node((request) => [replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", { blob: "x".repeat(4_096) }))]);
    const small = new NatsChoriaRpc(broker.nc, { ...clientSettings(version), maxReplyBytes: 1_024 });

    const error = await rejectionOf(small.call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toMatch(/exceeds the 1024 byte limit/);
  });

  const layer = (request: { version: 1 | 2 }) => PROTOCOL[request.version];
  it.each([
    ["transport", () => encoder.encode("{not json"), /invalid transport: not JSON/],
    [
      "secure reply",
      (request: { version: 1 | 2 }) => encoder.encode(JSON.stringify({ protocol: layer(request).transport, data: b64("[1]"), headers: {} })),
      /invalid secure reply: not a JSON object/,
    ],
    [
      "reply",
      (request: { version: 1 | 2 }) => {
        const inner = "{broken";
        const hash = createHash("sha256").update(inner).digest("base64");
        const secure =
          request.version === 1
            ? { protocol: layer(request).secureReply, message: inner, hash }
            : { protocol: layer(request).secureReply, reply: b64(inner), hash };
        return encoder.encode(JSON.stringify({ protocol: layer(request).transport, data: b64(JSON.stringify(secure)), headers: {} }));
      },
      /invalid reply: not JSON/,
    ],
  ])("rejects a reply whose %s layer is malformed", async (_layer, build, message) => {
    await node((request) => [build(request)]);

    const error = await rejectionOf(rpc().call(inventoryCall(300)));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toMatch(message);
  });

  it.each([
    ["not JSON", encoder.encode("pong"), /reply body is not JSON/],
    ["without statuscode", encoder.encode(JSON.stringify({ action: "inventory", statusmsg: "OK", data: {} })), /"statuscode"/],
    ["with array data", mcorpcReply("inventory", 0, "OK", []), /"data" must be an object/],
    ["without action", encoder.encode(JSON.stringify({ statuscode: 0, statusmsg: "OK", data: {} })), /"action"/],
  ])("fails at once with RpcProtocolError on a target's reply body %s", async (_case, body, message) => {
    await node((request) => [replyTo(request, NODE, body)]);

    const error = await rejectionOf(rpc().call(inventoryCall()));

    expect(error).toBeInstanceOf(RpcProtocolError);
    expect(error.message).toMatch(message);
  });

  it("decides on the first valid reply and does not wait for a second one", async () => {
    await node((request) => [
      replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", { reply: 1 })),
      replyTo(request, NODE, mcorpcReply("inventory", 0, "OK", { reply: 2 })),
    ]);

    const reply = await rpc().call(inventoryCall());

    expect(reply.data).toEqual({ reply: 1 });
  });
});

describe("identities that would become wildcard subjects", () => {
  it.each(["*", ">", "node.*", "node.>", "a b", ".node", "node.", "a..b", ""])("refuses %j before publishing anything", async (identity) => {
    const spy = await connect({ servers: broker.nats.url });
    responders.push(spy);
    let published = 0;
    spy.subscribe("provisioning.>", { callback: () => (published += 1) });
    await spy.flush();
    const rpc = new NatsChoriaRpc(broker.nc, clientSettings(1));

    const error = await rejectionOf(rpc.call({ ...inventoryCall(200), identity }));
    await broker.nc.flush();
    await spy.flush();

    expect(error).toBeInstanceOf(InvalidInputError);
    expect(published).toBe(0);
  });
});

describe("settings", () => {
  it("refuses a signer of the other protocol version and a v1 ttl below 30", () => {
    expect(() => new NatsChoriaRpc(broker.nc, { ...clientSettings(1), protocolVersion: 2 })).toThrow(InvalidInputError);
    expect(() => new NatsChoriaRpc(broker.nc, { ...clientSettings(1), ttl: 29 })).toThrow(/at least 30/);
  });
});
