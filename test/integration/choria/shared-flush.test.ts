/**
 * RPCs that start together share their flushes: the broker receives one PING for all the calls that
 * asked for a flush in one turn of the event loop, where each call used to send two of its own,
 * and every call still gets its reply from a node that answers at once (its subscription reached
 * the broker before its request). Counted where the PINGs land: on the wire into the broker.
 */
import { createServer, connect as connectTcp, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { clientSettings, mcorpcReply, replyTo, respond } from "./support";
import { brokerForSuite } from "../../support/suite";
import { hostAndPort } from "../../support/stall-proxy";

const CALLS = 20;
const identities = Array.from({ length: CALLS }, (_, i) => `node${i}.example.net`);
const broker = brokerForSuite();

/** A loopback TCP proxy to the broker that counts the PINGs clients send through it. */
let proxy: Server;
let pingsToBroker = 0;
const responders: NatsConnection[] = [];

beforeAll(async () => {
  const target = hostAndPort(broker.nats.url);
  proxy = createServer((client) => {
    const upstream = connectTcp(target.port, target.host);
    let tail = "";
    client.on("data", (chunk: Buffer) => {
      const text = tail + chunk.toString("latin1");
      pingsToBroker += text.split("PING\r\n").length - 1;
      tail = text.slice(-5);
      upstream.write(chunk);
    });
    upstream.pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  for (const identity of identities) {
    responders.push((await respond(broker.nats.url, `provisioning.node.${identity}`, (request) => [replyTo(request, identity, mcorpcReply("inventory", 0, "OK", {}))])).nc);
  }
});

afterAll(async () => {
  await Promise.all(responders.map((nc) => nc.close()));
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
});

describe("NatsChoriaRpc flushes", () => {
  it("sends one PING for the calls that start together, and every call gets its reply", async () => {
    // Arrange
    const nc = await connect({ servers: `127.0.0.1:${(proxy.address() as AddressInfo).port}`, pingInterval: 3_600_000 });
    const rpc = new NatsChoriaRpc(nc, clientSettings(2));
    await nc.flush();
    const pingsBefore = pingsToBroker;

    // Act
    const replies = await Promise.all(identities.map((identity) => rpc.call({ identity, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 10_000 })));
    await nc.flush();
    await nc.close();

    // Assert: every reply arrived; the calls' flushes (two each, plus the one above) came to far fewer PINGs.
    expect(replies.map((reply) => reply.sender)).toEqual(identities);
    const pings = pingsToBroker - pingsBefore;
    expect(pings).toBeGreaterThanOrEqual(2);
    expect(pings).toBeLessThan(CALLS);
  });
});
