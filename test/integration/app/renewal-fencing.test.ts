/**
 * Renewal fenced by the real lease: two deployments contest one site's lease on DynamoDB Local
 * through the real gate, and renew simulated provisioned nodes over a real nats-server. Deployment
 * A reserves the hosts due under its term, and is deposed before its first reprovision leaves (its
 * lease runs out and B takes the site over): the nodes' own records must show nothing from A, and
 * B, under the next term, renews them all, as the provisioning path's takeover tests require of a
 * deposed leader's configure.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startFleet } from "../../../dev/simulator";
import { LOCAL_AWS } from "../../../dev/local/services";
import { MemoryAdmissionStore } from "../../../lib/admission/memory-admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { DEFAULT_TTL_SECONDS } from "../../../lib/nats/rpc-client";
import { Renewal } from "../../../lib/app/renewal";
import { MemoryRenewalStore } from "../../../lib/app/renewal-state";
import { createLeaseTable, DynamoDbLeaseStore } from "../../../lib/lease/dynamodb-lease-store";
import { createLeaseGate, type LeaseGate } from "../../../lib/lease/gate";
import { LEASE_DEFAULTS } from "../../../lib/lease/settings";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import type { Clock } from "../../../lib/ports";
import { CappedWaitRpc, realClock, RecordingLogger, RecordingMetrics } from "../../support/fakes";
import { brokerForSuite } from "../../support/suite";
import { renewalSettings } from "../../support/renewal";
import { rpcClient } from "../../support/simulator";

const TOKEN = "renewal-fencing-token";
const HOUR_MS = 3_600_000;
/** Past what a challenger waits (expiry, skew bound, the requests' TTL as delivery horizon), on every clock of the test. */
const PAST_TAKEOVER_BOUND_MS = LEASE_DEFAULTS.leaseDurationMs + LEASE_DEFAULTS.skewBoundMs + DEFAULT_TTL_SECONDS * 1_000 + 5_000;

const broker = brokerForSuite();
let dynamo: DynamoDBClient;
let store: DynamoDbLeaseStore;

beforeAll(async () => {
  dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  const tableName = `renewal-fencing-lease-${randomUUID()}`;
  await createLeaseTable(dynamo, tableName);
  store = new DynamoDbLeaseStore({ client: dynamo, tableName });
});

afterAll(() => dynamo?.destroy());

async function elected(site: string, deploymentId: string, clock: Clock): Promise<{ gate: LeaseGate; term: number }> {
  const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId, deliveryHorizonMs: DEFAULT_TTL_SECONDS * 1_000 });
  const gate = createLeaseGate(settings, { store, metrics: new RecordingMetrics(), clock });
  const outcome = await gate.acquireOrRenew();
  if (!outcome.holding) throw new Error(`${deploymentId} did not win the lease of ${site}`);
  return { gate, term: outcome.term };
}

describe("renewal by a deposed leader", () => {
  it("sends nothing once its lease is gone (node side), and the next term's leader renews every host", { timeout: 60_000 }, async () => {
    // Arrange: provisioned nodes due for renewal; A leads the site.
    const site = `renewal-fencing-${randomUUID()}`;
    const time = realClock();
    const fleet = await startFleet({
      natsUrl: broker.nats.url,
      count: 4,
      identityPrefix: "fenced",
      token: TOKEN,
      initialConfig: { "plugin.choria.server.provision": "false" },
      restartDelayMs: 100,
      // The nodes judge each request's TTL on the same (jumping) clock as the deployments.
      clock: time,
    });
    try {
      const metrics = new RecordingMetrics();
      const registry = new AdmissionRegistry({ site, intervalMs: 60_000 }, { store: new MemoryAdmissionStore(), metrics, clock: time });
      const a = await elected(site, "deployment-a", time);
      const now = time.now();
      for (const identity of fleet.identities) {
        const begun = await registry.begin((await registry.admit(identity, "discovery", a.term))!, a.term);
        if (begun.status !== "claimed") throw new Error(`could not claim ${identity}`);
        await registry.complete(begun.claim, "provisioned", { expiresAt: now + 4 * HOUR_MS, kind: "certificate", issuedAt: now - HOUR_MS });
      }
      // The site's one renewal state, as both deployments of a site share their admission table's partition.
      const renewalStore = new MemoryRenewalStore();
      const rpc = new CappedWaitRpc(rpcClient(broker.nc, 1, { collective: "mcollective", clock: time }), 2_000);
      let b: { gate: LeaseGate; term: number } | undefined;
      let bTermBeganAt = Number.POSITIVE_INFINITY;
      const renewalOf = (gate: LeaseGate, prepareRpc: () => Promise<void>) =>
        new Renewal({
          settings: renewalSettings({ site, token: TOKEN, before: { ms: 6 * HOUR_MS }, ratePerMinute: 10, maxInFlight: 10 }),
          gate,
          registry,
          store: renewalStore,
          rpc,
          prepareRpc,
          clock: time,
          logger: new RecordingLogger(),
          metrics,
        });
      // A is deposed after it reserved its hosts and before its first request leaves: its lease runs
      // out on its own clock and B claims the site.
      const byA = renewalOf(a.gate, async () => {
        time.jump(PAST_TAKEOVER_BOUND_MS);
        bTermBeganAt = time.now();
        b = await elected(site, "deployment-b", time);
      });

      // Act
      const resultA = await byA.run({ remainingMs: () => 60_000 });
      // Anything A had let go would reach a node well within this.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const fromA = fleet.record.filter((entry) => entry.action === "reprovision");
      const resultB = await renewalOf(b!.gate, async () => undefined).run({ remainingMs: () => 60_000 });

      // Assert: A reserved every host, sent none, and freed them; B renewed every host under its term.
      expect(b!.term).toBe(a.term + 1);
      expect(fromA).toEqual([]);
      expect(resultA).toMatchObject({ status: "ran", term: a.term, sent: [], refused: [], inFlight: 0 });
      expect(resultB).toMatchObject({ status: "ran", term: b!.term, refused: [] });
      const ran = fleet.record.filter((entry) => entry.action === "reprovision");
      expect(ran.map((entry) => entry.identity).sort()).toEqual([...fleet.identities].sort());
      expect(ran.every((entry) => entry.outcome === 0 && entry.timeMs >= bTermBeganAt)).toBe(true);
      await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).inProvisioningMode), 10_000);
    } finally {
      await fleet.stop();
    }
  });
});
