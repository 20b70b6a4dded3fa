/**
 * Renewal on the local stack: the real handlers under the emulated Lambda runtime, with `renew`
 * scheduled beside the other functions because the configuration gives it a main broker. Simulated
 * nodes get server JWTs valid 120 s; renewal, due 90 s ahead of expiry, sends each reprovision, and
 * the usual pipeline provisions it again. The nodes' own records decide: which requests they ran,
 * when, and the JWT each holds at the end.
 *
 * The figures leave room on a loaded machine: the window opens 30 s after provisioning and each host
 * starts in its first half (by 75 s); two at a time, a host is back within one admission interval
 * (60 s: a host admitted less than an interval ago is not admitted again), so the third is sent
 * well before 120 s. The renewed JWTs fall due again; what follows the first renewal is not judged.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startNats, type RunningNats } from "../../dev/local/services";
import { startLocalStack, type LocalStack } from "../../dev/local/stack";
import type { RpcRecord } from "../../dev/simulator";
import { decodeJwt } from "../../lib/crypto/jwt";
import type { StatusFunctionReport } from "../../lib/app/operator/functions";

const NODES = 3;
const VALIDITY_MS = 120_000;
const BEFORE_MS = 90_000;
const RATE = 3;
const MAX_IN_FLIGHT = 2;

describe("renewal on the local stack", () => {
  let nats: RunningNats;
  let stack: LocalStack;
  const firstJwts = new Map<string, { exp: number }>();
  /** The nodes' records when every node was provisioned a second time. */
  let record: RpcRecord[] = [];
  /** The JWT each node held then, in normal mode (the wait's condition). */
  const renewedJwts = new Map<string, { exp: number }>();
  /** The leader's status then: the provisioning JWTs the nodes presented, forecast. */
  let provisioningJwts: StatusFunctionReport["registry"]["provisioningJwts"];

  beforeAll(async () => {
    nats = await startNats();
    stack = await startLocalStack({
      nodes: NODES,
      fast: true,
      features: ["jwt", "ed25519"],
      restartDelayMs: 200,
      nats,
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      waitTimeSeconds: 1,
      config: () => ({
        server_jwt_validity: `${VALIDITY_MS / 1000}s`,
        // The simulated nodes' main collective is on the same broker.
        renew: { enabled: true, before: `${BEFORE_MS / 1000}s`, rate: RATE, max_in_flight: MAX_IN_FLIGHT, broker_urls: [nats.url] },
      }),
    });
    stack.start();
    const { fleet } = stack;
    await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).inNormalMode && fleet.node(identity).serverJwt !== undefined), 120_000);
    for (const identity of fleet.identities) firstJwts.set(identity, decodeJwt(fleet.node(identity).serverJwt!).claims as { exp: number });
    // Every first JWT expires VALIDITY_MS after it was issued; each renewal is due before that.
    await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).provisioned >= 2 && fleet.node(identity).inNormalMode), 2 * VALIDITY_MS);
    record = [...fleet.record];
    for (const identity of fleet.identities) renewedJwts.set(identity, decodeJwt(fleet.node(identity).serverJwt!).claims as { exp: number });
    provisioningJwts = (await stack.deployments[0]!.app.status()).registry.provisioningJwts;
  }, 4 * VALIDITY_MS);

  afterAll(async () => {
    await stack?.stop();
    await nats?.stop();
  }, 30_000);

  const reprovisions = () => record.filter((entry) => entry.action === "reprovision" && entry.outcome !== "dropped");
  /** When the node was configured the second time: the end of its first renewal. */
  const reconfiguredAt = (identity: string) => record.filter((entry) => entry.identity === identity && entry.action === "configure")[1]?.timeMs ?? Number.POSITIVE_INFINITY;

  it("sends each node one reprovision before its server JWT expires, and the node ends in normal mode with a new JWT that expires later", () => {
    for (const identity of stack.fleet.identities) {
      const sent = reprovisions().filter((entry) => entry.identity === identity && entry.timeMs < reconfiguredAt(identity));
      const first = firstJwts.get(identity)!;
      expect({ identity, sent: sent.length, outcome: sent[0]?.outcome }).toEqual({ identity, sent: 1, outcome: 0 });
      expect(sent[0]!.timeMs).toBeLessThan(first.exp * 1000);
      expect(renewedJwts.get(identity)!.exp).toBeGreaterThan(first.exp);
    }
  });

  it("keeps to the rate and the in-flight bound, counted from the nodes' records", () => {
    const sends = reprovisions().map((entry) => entry.timeMs).sort((a, b) => a - b);
    // No minute holds more than the rate.
    for (const [index, at] of sends.entries()) expect(sends.filter((other) => other >= at && other < at + 60_000).length, `sends from ${index}`).toBeLessThanOrEqual(RATE);
    // A node is out from its reprovision until its next configure; never more than the bound at once.
    const outages = reprovisions().map((entry) => {
      const back = record.find((later) => later.identity === entry.identity && later.action === "configure" && later.timeMs > entry.timeMs);
      return { from: entry.timeMs, to: back?.timeMs ?? Number.POSITIVE_INFINITY };
    });
    for (const outage of outages) expect(outages.filter((other) => other.from <= outage.from && other.to > outage.from).length).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  });

  it("status forecasts the provisioning JWT every node presented, provisioned and renewed, by its issuer and expiry", () => {
    const { iss, exp } = decodeJwt(stack.fleet.provisioningJwt).claims as { iss: string; exp: number };

    // The fleet's token is valid a year: none expiring within the default 30 days, none expired.
    expect(provisioningJwts).toEqual({
      windowMs: 30 * 24 * 3_600_000,
      expiring: 0,
      expired: 0,
      issuers: [{ issuer: iss, hosts: NODES, expiring: 0, expired: 0, nextExpiresAt: exp * 1000 }],
    });
  });
});
