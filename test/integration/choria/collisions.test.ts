/**
 * Two machines answering as one identity, seen on a real nats-server (docs/audit.md): discovery
 * reports an identity that sent two different replies, and a call given `laterReplies` hands on
 * the replies after the deciding one. A reply the network delivered twice is byte-identical and
 * is no collision: discovery counts it once and the call hands on no copy.
 */
import type { NatsConnection } from "nats";
import { afterEach, describe, expect, it } from "vitest";
import { encodeReply } from "../../support/choria-node/protocol";
import { BroadcastDiscoverer } from "../../../lib/nats/discovery";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import type { RpcReply } from "../../../lib/ports/rpc";
import { clientSettings, encoder, mcorpcReply, replyTo, respond } from "./support";
import { brokerForSuite } from "../../support/suite";
import type { IncomingRequest } from "../../support/choria-node/protocol";

const broker = brokerForSuite();
const responders: NatsConnection[] = [];

afterEach(async () => {
  await Promise.all(responders.splice(0).map((nc) => nc.close()));
});

async function responder(subject: string, answer: (request: IncomingRequest) => Uint8Array[]) {
  const replier = await respond(broker.nats.url, subject, answer);
  responders.push(replier.nc);
}

/** A reply `secondsLater` seconds after now: two machines never answer with the same bytes (v1 times are whole seconds). */
function replyAt(request: IncomingRequest, sender: string, payload: Uint8Array, secondsLater: number): Uint8Array {
  return encodeReply({ version: request.version, requestId: request.id, senderId: sender, agent: request.agent, timeMs: Date.now() + secondsLater * 1000, payload });
}

describe.each([1, 2] as const)("collisions over protocol v%i", (version) => {
  it("discovery reports an identity two machines answer as, with each reply's fingerprint, and not one whose reply came twice", async () => {
    // Arrange: twins, and a node whose one reply the network delivers twice.
    const discovery = "provisioning.broadcast.agent.discovery";
    const pong = encoder.encode("pong");
    await responder(discovery, (request) => [replyAt(request, "twin.example.net", pong, 0)]);
    await responder(discovery, (request) => [replyAt(request, "twin.example.net", pong, 2)]);
    await responder(discovery, (request) => {
      const reply = replyTo(request, "echo.example.net", pong);
      return [reply, reply];
    });
    const discoverer = new BroadcastDiscoverer(broker.nc, clientSettings(version));

    // Act
    const result = await discoverer.discoverWithStats();

    // Assert
    expect([...result.identities].sort()).toEqual(["echo.example.net", "twin.example.net"]);
    expect(result.replies).toBe(4);
    expect(result.collisions).toHaveLength(1);
    const [collision] = result.collisions ?? [];
    expect(collision?.identity).toBe("twin.example.net");
    expect(collision?.replies).toHaveLength(2);
    for (const reply of collision?.replies ?? []) expect(reply.reply).toMatch(/^[0-9a-f]{16}$/);
  });

  it("a call with laterReplies returns at the first reply and hands on the other machine's reply, once, never a byte-identical copy", async () => {
    // Arrange
    const identity = "twin.example.net";
    const body = (ecdh: string) => mcorpcReply("jwt", 0, "OK", { jwt: "a.b.c", ecdh_public: ecdh });
    await responder(`provisioning.node.${identity}`, (request) => [replyTo(request, identity, body("aa"))]);
    await responder(`provisioning.node.${identity}`, (request) => {
      const reply = replyAt(request, identity, body("bb"), 2);
      return [reply, reply];
    });
    const later: RpcReply[] = [];
    let stop: () => void = () => undefined;
    const until = new Promise<void>((resolve) => (stop = resolve));
    const rpc = new NatsChoriaRpc(broker.nc, clientSettings(version));

    // Act
    const reply = await rpc.call({ identity, agent: "choria_provision", action: "jwt", data: {}, timeoutMs: 5_000, laterReplies: { onReply: (answer) => later.push(answer), until } });
    await expect.poll(() => later.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(1);
    // The second twin's copy of its own reply is on the wire behind its first: one flush of our connection sees both handled.
    await broker.nc.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    stop();

    // Assert: whichever twin answered first, the other's answer came after it, once.
    const ecdhOf = (answer: RpcReply) => answer.data.ecdh_public;
    expect(["aa", "bb"]).toContain(ecdhOf(reply));
    expect(later.map(ecdhOf)).toEqual([ecdhOf(reply) === "aa" ? "bb" : "aa"]);
    expect(later[0]).toMatchObject({ sender: identity, statuscode: 0 });
  });
});
