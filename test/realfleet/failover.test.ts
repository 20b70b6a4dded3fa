/**
 * A leader and a standby deployment provision a real go-choria fleet (protocol v2, jwt + ed25519);
 * the leader crashes mid-run, as soon as the first node reports it was configured. Nodes started
 * after the crash are provisioned by the standby once it won the lease. What counts is what the
 * nodes saw: each node's log shows exactly one configuration rewrite and one restart, and every
 * node left provisioning mode and arrived on the target broker.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { METRIC } from "../../lib/ports";
import { provisionedFleet, provisioningActions, waitForArrivals, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";

const FIRST = ["n1.fo.real.example.net", "n2.fo.real.example.net", "n3.fo.real.example.net", "n4.fo.real.example.net"];
const AFTER_CRASH = ["n5.fo.real.example.net", "n6.fo.real.example.net"];
const ALL = [...FIRST, ...AFTER_CRASH];

describe("real fleet, leader crash with a standby", () => {
  let provisioned: ProvisionedFleet;
  let leaderBefore: { holder: string; term: number };
  let leaderAfter: { holder: string; term: number };
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

    const configured = () => provisioned.provisioningEvents.of("provisioned", "provision_mode_server").length;
    await waitUntil(() => (configured() > 0 ? undefined : "no node was configured"), 180_000);
    const lease = await stack.lease();
    if (!lease) throw new Error("a node was provisioned without a lease");
    leaderBefore = { holder: lease.holder, term: lease.term };
    const leader = stack.deployments.find((deployment) => deployment.id === lease.holder);
    if (!leader) throw new Error(`lease holder ${lease.holder} is not a deployment`);
    const crashedAt = Date.now();
    figures.configuredBeforeCrash = configured();
    leader.kill();
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

  it("configures and restarts every node exactly once, and none is left in provisioning mode", async () => {
    for (const identity of ALL) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: 1, restarted: 1 });
      expect((await node.config())?.["plugin.choria.server.provision"]).toBe("false");
      expect(node.running).toBe(true);
    }
    const arrivals = provisioned.targetEvents.of("startup").map((event) => event.identity);
    expect(arrivals.sort()).toEqual([...ALL].sort());
  });

  it("publishes one provisioned event per node from provisioning mode", () => {
    const provisionedEvents = provisioned.provisioningEvents.of("provisioned", "provision_mode_server").map((event) => event.identity);
    expect(provisionedEvents.sort()).toEqual([...ALL].sort());
  });
});
