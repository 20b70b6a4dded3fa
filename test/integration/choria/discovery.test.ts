import type { NatsConnection } from "nats";
import { afterEach, describe, expect, it } from "vitest";
import { BroadcastDiscoverer } from "../../../lib/nats/discovery";
import { matchesFilter } from "../../support/choria-node/filter";
import type { IncomingRequest } from "../../support/choria-node/protocol";
import { clientSettings, encoder, replyTo, respond } from "./support";
import { brokerForSuite } from "../../support/suite";

const broker = brokerForSuite();
const responders: NatsConnection[] = [];

afterEach(async () => {
  await Promise.all(responders.splice(0).map((nc) => nc.close()));
});

const PROVISIONING_AGENTS = ["choria_provision", "choria_util", "discovery", "rpcutil"];

/** Answers like a node's discovery agent: only when the filter matches and the payload says ping. */
async function fakeNode(identity: string, agents = PROVISIONING_AGENTS, replies = 1) {
  const responder = await respond(broker.nats.url, "provisioning.broadcast.agent.discovery", (request: IncomingRequest) => {
    const ping = new TextDecoder().decode(request.payload) === "ping";
    if (!ping || !matchesFilter(request.filter, { identity, agents })) return [];
    return Array.from({ length: replies }, () => replyTo(request, identity, encoder.encode("pong")));
  });
  responders.push(responder.nc);
  return responder;
}

async function rawReplier(answer: (request: IncomingRequest) => Uint8Array) {
  const responder = await respond(broker.nats.url, "provisioning.broadcast.agent.discovery", (request) => [answer(request)]);
  responders.push(responder.nc);
}

describe.each([1, 2] as const)("BroadcastDiscoverer over protocol v%i", (version) => {
  it("finds every provisioning node once and skips undecodable or unsafe replies", async () => {
    const [first] = await Promise.all([
      fakeNode("n1.example.net"),
      fakeNode("n2.example.net"),
      fakeNode("n3.example.net", PROVISIONING_AGENTS, 2),
      fakeNode("provisioned.example.net", ["choria_util", "discovery", "rpcutil"]),
    ]);
    await rawReplier(() => encoder.encode("garbage"));
    await rawReplier((request) => replyTo(request, "evil.*", encoder.encode("pong")));
    const discoverer = new BroadcastDiscoverer(broker.nc, clientSettings(version));

    const result = await discoverer.discoverWithStats();

    expect([...result.identities].sort()).toEqual(["n1.example.net", "n2.example.net", "n3.example.net"]);
    expect(result.replies).toBe(6);
    expect(result.skipped).toBe(2);
    expect(first.requests[0]).toMatchObject({
      version,
      agent: "discovery",
      collective: "provisioning",
      ttl: 30,
      filter: { agent: ["choria_provision"], fact: [], cf_class: [], identity: [], compound: [] },
    });
  });

  it("returns nothing when no node answers", async () => {
    const discoverer = new BroadcastDiscoverer(broker.nc, { ...clientSettings(version), discoveryTimeoutMs: 300 });

    expect(await discoverer.discover()).toEqual([]);
  });
});

describe("discovery admission is bounded (discovery_max_nodes)", () => {
  it("stops reading at the cap when one hostile client forges thousands of distinct replies", async () => {
    // Arrange: one client answers the broadcast with 2,005 replies, each claiming another identity.
    const forged = 2_005;
    await rawFlood((request) => Array.from({ length: forged }, (_, index) => replyTo(request, `forged-${index}.example.net`, encoder.encode("pong"))));
    const discoverer = new BroadcastDiscoverer(broker.nc, { ...clientSettings(1), maxIdentities: 100 });

    // Act
    const result = await discoverer.discoverWithStats();

    // Assert
    expect(result.identities).toHaveLength(100);
    expect(result.capped).toBe(true);
    expect(result.replies).toBeLessThan(forged);
  });

  it("is not capped when the fleet is below the cap", async () => {
    await rawFlood((request) => [replyTo(request, "n1.example.net", encoder.encode("pong")), replyTo(request, "n2.example.net", encoder.encode("pong"))]);
    const discoverer = new BroadcastDiscoverer(broker.nc, { ...clientSettings(1), maxIdentities: 2 + 1 });

    const result = await discoverer.discoverWithStats();

    expect([...result.identities].sort()).toEqual(["n1.example.net", "n2.example.net"]);
    expect(result.capped).toBe(false);
  });
});

async function rawFlood(answer: (request: IncomingRequest) => Uint8Array[]) {
  const responder = await respond(broker.nats.url, "provisioning.broadcast.agent.discovery", answer);
  responders.push(responder.nc);
}
