import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uuidHex } from "../../../lib/crypto/ids";
import { type Fleet, startFleet } from "../../../dev/simulator";
import { FLEET_TOKEN, rpcClient } from "../../support/simulator";
import { brokerForSuite } from "../../support/suite";

const IDENTITY = "strict.example.net";
const encoder = new TextEncoder();

function base64(text: string): string {
  return Buffer.from(text, "utf8").toString("base64");
}

/** A v1 request built by hand, so each envelope field can be wrong in a way the codec refuses to produce. */
function v1Request(envelope: Record<string, unknown>, replyTo: string): Uint8Array {
  const request = JSON.stringify({
    protocol: "choria:request:1",
    message: JSON.stringify({ agent: "rpcutil", action: "inventory", data: {} }),
    envelope,
  });
  const secure = JSON.stringify({ protocol: "choria:secure:request:1", message: request, signature: "insecure", pubcert: "insecure" });
  return encoder.encode(
    JSON.stringify({ protocol: "choria:transport:1", data: base64(secure), headers: { "reply-to": replyTo, mc_sender: "provisioner.example.net" } }),
  );
}

function envelope(overrides: Record<string, unknown>): Record<string, unknown> {
  return {
    requestid: uuidHex(),
    senderid: "provisioner.example.net",
    callerid: "choria=provisioner.mcollective",
    collective: "provisioning",
    agent: "rpcutil",
    ttl: 60,
    time: Math.trunc(Date.now() / 1000),
    filter: { fact: [], cf_class: [], agent: ["rpcutil"], identity: [], compound: [] },
    ...overrides,
  };
}

describe("requests a real server would drop get no reply and are recorded as dropped", () => {
  const broker = brokerForSuite();
  let fleet: Fleet;

  beforeAll(async () => {
    fleet = await startFleet({ natsUrl: broker.nats.url, identities: [IDENTITY], token: FLEET_TOKEN });
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  it.each([
    ["a request id of the wrong length", (replyTo: string) => v1Request(envelope({ requestid: "abc" }), replyTo), 'invalid request envelope: "requestid" must be exactly 32 characters'],
    ["a ttl below 30", (replyTo: string) => v1Request(envelope({ ttl: 10 }), replyTo), 'invalid request envelope: "ttl" must be at least 30'],
    ["a filter missing keys", (replyTo: string) => v1Request(envelope({ filter: { agent: ["rpcutil"] } }), replyTo), 'invalid request filter: "fact" must be an array'],
    ["another collective", (replyTo: string) => v1Request(envelope({ collective: "mcollective" }), replyTo), "unknown collective mcollective"],
    ["an expired time", (replyTo: string) => v1Request(envelope({ time: Math.trunc(Date.now() / 1000) - 120 }), replyTo), "request is outside its ttl"],
    [
      "an agent filter the node does not match",
      (replyTo: string) => v1Request(envelope({ filter: { fact: [], cf_class: [], agent: ["puppet"], identity: [], compound: [] } }), replyTo),
      "filter does not match",
    ],
    ["garbage bytes", () => encoder.encode("\u0000garbage"), "invalid transport: not JSON"],
  ])("%s", async (_case, build, reason) => {
    const replyTo = `provisioning.reply.test.${uuidHex()}`;
    let replies = 0;
    const subscription = broker.nc.subscribe(replyTo, { callback: () => (replies += 1) });
    await broker.nc.flush();

    broker.nc.publish(`provisioning.node.${IDENTITY}`, build(replyTo));
    await fleet.waitFor(() => fleet.record.some((entry) => entry.reason === reason));
    // Any reply to the bad request would be published before the answer to this later one.
    await rpcClient(broker.nc, 1).call({ identity: IDENTITY, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 2_000 });
    subscription.unsubscribe();

    expect(replies).toBe(0);
    expect(fleet.record.find((entry) => entry.reason === reason)).toMatchObject({ identity: IDENTITY, outcome: "dropped" });
  });
});
