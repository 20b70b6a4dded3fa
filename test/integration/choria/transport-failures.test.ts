/**
 * Failures of our own path to the broker are transport failures (RpcTransportError), which the
 * engine hands back for a retry instead of counting them against the host: a connection that
 * closed, a path that stalled before the request left, and one that stalled after the publish so
 * the broker never confirmed it. Real nats-server and simulated node, a stall proxy in between.
 */
import { connect, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RpcNotSentError, RpcTimeoutError, RpcTransportError } from "../../../lib/errors";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { type RunningNats, startNats } from "../../../dev/local/services";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { hostAndPort, startStallProxy, type StallProxy } from "../../support/stall-proxy";
import { clientSettings } from "./support";

const TOKEN = "transport-token";

let nats: RunningNats;
let fleet: Fleet;
let proxy: StallProxy | undefined;
let client: NatsConnection | undefined;

beforeAll(async () => {
  nats = await startNats();
  fleet = await startFleet({ natsUrl: nats.url, count: 1, identityPrefix: "transport", token: TOKEN, recordDiscovery: false });
});

afterEach(async () => {
  proxy?.thaw();
  await client?.close().catch(() => undefined);
  await proxy?.close();
  proxy = undefined;
  client = undefined;
});

afterAll(async () => {
  await fleet?.stop();
  await nats?.stop();
});

const identity = () => fleet.identities[0] as string;
const inventory = { agent: "rpcutil", action: "inventory", data: {} };

async function throughProxy(onPublish?: () => void): Promise<NatsChoriaRpc> {
  proxy = await startStallProxy(hostAndPort(nats.url));
  client = await connect({ servers: `nats://${proxy.address}` });
  return new NatsChoriaRpc(client, { ...clientSettings(1), ...(onPublish ? { onPublish } : {}) });
}

describe("transport failures of an RPC", () => {
  it("a closed connection is a transport failure", async () => {
    const rpc = await throughProxy();
    await client!.close();

    const outcome = await rpc.call({ identity: identity(), ...inventory, timeoutMs: 600 }).catch((error: unknown) => error);

    expect(outcome).toBeInstanceOf(RpcTransportError);
  });

  it("a path stalled before the request left is a transport failure (not sent)", async () => {
    const rpc = await throughProxy();
    proxy!.freeze();

    const outcome = await rpc.call({ identity: identity(), ...inventory, timeoutMs: 600, sendWithinMs: 300 }).catch((error: unknown) => error);

    expect(outcome).toBeInstanceOf(RpcNotSentError);
    expect(outcome).toBeInstanceOf(RpcTransportError);
  });

  it("a path that stalled right after the publish, so the broker never confirmed it, is a transport failure", async () => {
    const rpc = await throughProxy(() => proxy!.freeze());
    const before = fleet.record.filter((entry) => entry.identity === identity()).length;

    const outcome = await rpc.call({ identity: identity(), ...inventory, timeoutMs: 600 }).catch((error: unknown) => error);

    expect(outcome).toBeInstanceOf(RpcTransportError);
    expect(fleet.record.filter((entry) => entry.identity === identity())).toHaveLength(before);
  });

  it("silence after a confirmed publish stays the node's timeout", async () => {
    const rpc = await throughProxy();

    const outcome = await rpc.call({ identity: "absent.example.net", ...inventory, timeoutMs: 600 }).catch((error: unknown) => error);

    expect(outcome).toBeInstanceOf(RpcTimeoutError);
    expect(outcome).not.toBeInstanceOf(RpcTransportError);
  });
});
