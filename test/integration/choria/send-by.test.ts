/**
 * The send-by discipline (docs/lease.md), observed at the node: a request the gate admitted must not reach a node after
 * its attempt is over. The provisioner's path to the broker is stalled (TCP open, no bytes) through
 * a loopback proxy while the simulated node sits on the broker directly; the attempt times out;
 * the path heals; the node must never see the request.
 */
import { connect, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeRequest } from "../../support/choria-node/protocol";
import { RpcNotSentError, RpcError } from "../../../lib/errors";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { type RunningNats, startNats } from "../../../dev/local/services";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { hostAndPort, startStallProxy, type StallProxy } from "../../support/stall-proxy";
import { clientSettings } from "./support";

const TOKEN = "send-by-token";

let nats: RunningNats;
let fleet: Fleet;
let proxy: StallProxy;
let client: NatsConnection;
const extraConnections: NatsConnection[] = [];

beforeAll(async () => {
  nats = await startNats();
  fleet = await startFleet({ natsUrl: nats.url, count: 1, identityPrefix: "sendby", token: TOKEN, recordDiscovery: false });
});

afterEach(async () => {
  proxy?.thaw();
  await client?.close().catch(() => undefined);
  await proxy?.close();
  await Promise.all(extraConnections.splice(0).map((nc) => nc.close()));
});

afterAll(async () => {
  await fleet?.stop();
  await nats?.stop();
});

async function stalledClient(): Promise<NatsChoriaRpc> {
  proxy = await startStallProxy(hostAndPort(nats.url));
  client = await connect({ servers: `nats://${proxy.address}` });
  return new NatsChoriaRpc(client, clientSettings(1));
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const identity = () => fleet.identities[0] as string;
const received = () => fleet.record.filter((entry) => entry.identity === identity() && entry.action === "inventory");

describe("send-by discipline over a stalled path to the broker", () => {
  it("an attempt that times out while the path is stalled is never published: after the path heals the node receives nothing", async () => {
    // Arrange
    const rpc = await stalledClient();
    const before = received().length;
    proxy.freeze();

    // Act: the gate's window lets the request leave for 300 ms; the attempt waits 600 ms.
    const outcome = await rpc
      .call({ identity: identity(), agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 600, sendWithinMs: 300 })
      .catch((error: unknown) => error);
    proxy.thaw();
    await client.flush();
    await settle(300);

    // Assert
    expect(received().length).toBe(before);
    expect(outcome).toBeInstanceOf(RpcError);
    expect(rpc.hasUnconfirmedPublishes()).toBe(false);
  });

  it("publishes nothing once the send-by instant has passed, even on a healthy path", async () => {
    // Arrange
    const rpc = await stalledClient();
    const before = received().length;

    // Act
    const outcome = await rpc
      .call({ identity: identity(), agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 500, sendWithinMs: -1 })
      .catch((error: unknown) => error);
    await settle(200);

    // Assert
    expect(outcome).toBeInstanceOf(RpcNotSentError);
    expect(received().length).toBe(before);
  });

  it("stamps the envelope time given by the gate check, not the moment of the send", async () => {
    // Arrange: a raw observer of the node subject on the broker itself.
    const rpc = await stalledClient();
    const observer = await connect({ servers: nats.url });
    extraConnections.push(observer);
    const times: number[] = [];
    observer.subscribe(`provisioning.node.${identity()}`, {
      callback: (_error, message) => times.push(decodeRequest(message.data).timeSeconds),
    });
    await observer.flush();
    const checkedMsAgo = 10_000;

    // Act
    await rpc.call({ identity: identity(), agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 2_000, gateCheckedMsAgo: checkedMsAgo }).catch(() => undefined);
    await observer.flush();

    // Assert: v1 envelope time is in whole seconds.
    expect(times).toHaveLength(1);
    expect(Date.now() - (times[0] as number) * 1000).toBeGreaterThanOrEqual(checkedMsAgo);
  });
});
