/**
 * A leader and a standby deployment provision a real go-choria fleet (protocol v2, jwt + ed25519).
 * The leader crashes at the worst point of a host's sequence: it has configured its first host and
 * is about to restart it. Its other hosts are admitted and queued under its term. Nodes started
 * after the crash are provisioned by the standby once it won the lease. What counts is what the
 * nodes saw: the host the crash caught half done is configured again by the new leader (a
 * configuration from the old term is not taken for the new term's) and restarted once; every other
 * node is configured and restarted exactly once; all leave provisioning mode and arrive on the
 * target broker. Our own log says which term sent what: nothing from the old term comes once the new
 * term has started sending.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { METRIC } from "../../lib/ports/metric-names";
import { provisionedFleet, provisioningActions, waitForArrivals, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";

const FIRST = ["n1.fo.real.example.net", "n2.fo.real.example.net", "n3.fo.real.example.net", "n4.fo.real.example.net"];
const AFTER_CRASH = ["n5.fo.real.example.net", "n6.fo.real.example.net"];
const ALL = [...FIRST, ...AFTER_CRASH];

describe("real fleet, leader crash with a standby", () => {
  let provisioned: ProvisionedFleet;
  let leaderBefore: { holder: string; term: number };
  let leaderAfter: { holder: string; term: number };
  let halfDone = "";
  const figures: Record<string, number | string> = {};

  beforeAll(async () => {
    provisioned = await provisionedFleet({
      identities: FIRST,
      protocolV2: true,
      features: ["jwt", "ed25519"],
      deployments: ["blue", "green"],
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      // One host at a time, so the crash leaves the leader with admitted, queued and in-flight work.
      stack: { workers: 1, maxConcurrency: 1, batchSize: 1 },
    });
    const { stack, fleet } = provisioned;
    await fleet.startAll();
    const started = Date.now();
    stack.start();

    const lease = await waitForLease(stack, 180_000);
    leaderBefore = { holder: lease.holder, term: lease.term };
    const leader = stack.deployments.find((deployment) => deployment.id === lease.holder);
    if (!leader) throw new Error(`lease holder ${lease.holder} is not a deployment`);
    // The crash lands as the leader logs that it restarts its first host, before that restart's
    // deadline check: the host is configured and never restarted by this term.
    let crashedAt = 0;
    provisioned.logs.onFirst("Restarting node", (record) => {
      halfDone = String(record.attributes?.identity);
      crashedAt = Date.now();
      leader.kill();
    });
    await waitUntil(() => (crashedAt > 0 ? undefined : "the leader reached no host's restart"), 180_000);
    figures.halfDone = halfDone;
    const atCrash = await stack.lease();
    if (atCrash?.holder !== lease.holder || atCrash.term !== lease.term) throw new Error(`the lease moved before the crash: ${lease.holder}@${lease.term}, then ${atCrash?.holder}@${atCrash?.term}`);
    for (const identity of AFTER_CRASH) await fleet.addNode(identity);

    await waitForArrivals(provisioned, ALL, 240_000);
    const after = await stack.lease();
    leaderAfter = { holder: after?.holder ?? "", term: after?.term ?? 0 };
    figures.crashToLastArrivalSeconds = Math.round((Date.now() - crashedAt) / 100) / 10;
    figures.totalSeconds = Math.round((Date.now() - started) / 100) / 10;
    figures.leaderBefore = `${leaderBefore.holder}@${leaderBefore.term}`;
    figures.leaderAfter = `${leaderAfter.holder}@${leaderAfter.term}`;
    for (const deployment of stack.deployments) figures[`provisionedBy_${deployment.id}`] = deployment.metrics.total(METRIC.provisioned);
    process.stdout.write(`real-fleet failover figures: ${JSON.stringify(figures)}\n`);
  });

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("moves the lease to the standby with a higher term", () => {
    expect(leaderAfter.holder).not.toBe(leaderBefore.holder);
    expect(leaderAfter.term).toBeGreaterThan(leaderBefore.term);
  });

  it("configures the half-done host again and every other node once, and restarts each exactly once", async () => {
    expect(FIRST).toContain(halfDone);
    for (const identity of ALL) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: identity === halfDone ? 2 : 1, restarted: 1 });
      expect((await node.config())?.["plugin.choria.server.provision"]).toBe("false");
      expect(node.running).toBe(true);
    }
    const arrivals = provisioned.targetEvents.of("startup").map((event) => event.identity);
    expect(arrivals.sort()).toEqual([...ALL].sort());
  });

  it("counts no host as provisioned by the crashed leader", () => {
    const crashed = provisioned.stack.deployments.find((deployment) => deployment.id === leaderBefore.holder)!;
    const standby = provisioned.stack.deployments.find((deployment) => deployment.id === leaderAfter.holder)!;
    expect({ crashed: crashed.metrics.total(METRIC.provisioned), standby: standby.metrics.total(METRIC.provisioned) }).toEqual({ crashed: 0, standby: ALL.length });
  });

  it("sends nothing from the old term once the new term has sent anything", () => {
    const sends = provisioned.logs.records.filter((record) => record.message === "Configuring node" || record.message === "Restarting node");
    const terms = sends.map((record) => Number(record.attributes?.term));
    expect(terms[0]).toBe(leaderBefore.term);
    expect(terms.at(-1)).toBe(leaderAfter.term);
    const older = terms.findIndex((term, index) => index > 0 && term < terms[index - 1]!);
    expect(older, `a send from term ${terms[older]} after one from term ${terms[older - 1]}`).toBe(-1);
  });

  it("publishes one provisioned event per configuration a node received", async () => {
    const events = provisioned.provisioningEvents.of("provisioned", "provision_mode_server").map((event) => event.identity);
    expect(events.sort()).toEqual([...ALL, halfDone].sort());
  });

  async function waitForLease(stack: ProvisionedFleet["stack"], timeoutMs: number) {
    let lease: Awaited<ReturnType<ProvisionedFleet["stack"]["lease"]>>;
    const deadline = Date.now() + timeoutMs;
    while (!(lease = await stack.lease())) {
      if (Date.now() > deadline) throw new Error(`no deployment took the lease within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return lease;
  }
});
