/**
 * Renewal fenced by the real lease: two deployments contest one site's lease on DynamoDB Local
 * through the real gate, and renew simulated provisioned nodes over a real nats-server. Like
 * deployments of a site, each has its own DynamoDB client, lease store, admission registry and
 * renewal store, on the site's one lease table and one admission table (which holds the renewal
 * state in its `renewal#<site>` partition). Deployment A provisioned the hosts and reserves the
 * ones due under its term, and is deposed before its first reprovision leaves (its lease runs out
 * and B takes the site over): the nodes' own records must show nothing from A, and B, under the
 * next term, finds A's hosts in the shared table and renews them all, as the provisioning path's
 * takeover tests require of a deposed leader's configure.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startFleet } from "../../../dev/simulator";
import { LOCAL_AWS } from "../../../dev/local/services";
import { createProvisionerTables, type ProvisionerTables } from "../../../dev/local/resources";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { DynamoDbRenewalStore } from "../../../lib/dynamodb/renewal-store";
import { Renewal } from "../../../lib/app/renewal";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseGate } from "../../../lib/ports/lease-gate";
import { LEASE_DEFAULTS, resolveLeaseSettings } from "../../../lib/lease/settings";
import type { Clock } from "../../../lib/ports/clock";
import type { Metrics } from "../../../lib/ports/metrics";
import { CappedWaitRpc, realClock, RecordingLogger, RecordingMetrics } from "../../support/fakes";
import { brokerForSuite } from "../../support/suite";
import { renewalSettings } from "../../support/renewal";
import { rpcClient } from "../../support/simulator";

/** The RPC client's default request TTL, v1 servers' minimum: how long a delayed request may still run. */
const DEFAULT_TTL_SECONDS = 30;

const TOKEN = "renewal-fencing-token";
const HOUR_MS = 3_600_000;
/** Past what a challenger waits (expiry, skew bound, the requests' TTL as delivery horizon), on every clock of the test. */
const PAST_TAKEOVER_BOUND_MS = LEASE_DEFAULTS.leaseDurationMs + LEASE_DEFAULTS.skewBoundMs + DEFAULT_TTL_SECONDS * 1_000 + 5_000;

const broker = brokerForSuite();
/** The site's one lease table and one admission table, as every deployment of a site names them. */
let tables: ProvisionerTables;
const clients: DynamoDBClient[] = [];

beforeAll(async () => {
  const id = randomUUID();
  tables = { lease: `renewal-fencing-lease-${id}`, admission: `renewal-fencing-admission-${id}` };
  const setup = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  clients.push(setup);
  await createProvisionerTables(setup, tables);
});

afterAll(() => clients.forEach((client) => client.destroy()));

/** What one deployment of the site reaches DynamoDB with: its own client and stores, on the shared tables. */
interface DeploymentStores {
  lease: DynamoDbLeaseStore;
  registry: AdmissionRegistry;
  renewal: DynamoDbRenewalStore;
}

function deploymentStores(site: string, clock: Clock, metrics: Metrics): DeploymentStores {
  const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  clients.push(client);
  return {
    lease: new DynamoDbLeaseStore({ client, tableName: tables.lease }),
    registry: new AdmissionRegistry({ site, intervalMs: 60_000 }, { store: new DynamoDbAdmissionStore({ client, tableName: tables.admission }), metrics, clock }),
    renewal: new DynamoDbRenewalStore({ client, tableName: tables.admission }),
  };
}

async function elected(site: string, deploymentId: string, store: DynamoDbLeaseStore, clock: Clock): Promise<{ gate: LeaseGate; term: number }> {
  const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId, deliveryHorizonMs: DEFAULT_TTL_SECONDS * 1_000 });
  const gate = createLeaseGate(settings, { store, metrics: new RecordingMetrics(), clock });
  const outcome = await gate.acquireOrKeep();
  if (!outcome.holding) throw new Error(`${deploymentId} did not win the lease of ${site}`);
  return { gate, term: outcome.term };
}

describe("renewal by a deposed leader", () => {
  it("sends nothing once its lease is gone (node side), and the next term's leader renews every host from the shared table", { timeout: 60_000 }, async () => {
    // Arrange: A leads the site and provisioned the nodes (its registry writes the shared admission table); they are due for renewal.
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
      const storesA = deploymentStores(site, time, metrics);
      const storesB = deploymentStores(site, time, metrics);
      const a = await elected(site, "deployment-a", storesA.lease, time);
      const now = time.now();
      const expiresAt = now + 4 * HOUR_MS;
      for (const identity of fleet.identities) {
        const begun = await storesA.registry.begin((await storesA.registry.admit(identity, "discovery", a.term))!, a.term);
        if (begun.status !== "claimed") throw new Error(`could not claim ${identity}`);
        await storesA.registry.complete(begun.claim, "provisioned", { expiresAt, kind: "certificate", issuedAt: now - HOUR_MS });
      }
      const rpc = new CappedWaitRpc(rpcClient(broker.nc, 1, { collective: "mcollective", clock: time }), 2_000);
      let b: { gate: LeaseGate; term: number } | undefined;
      let bTermBeganAt = Number.POSITIVE_INFINITY;
      const renewalOf = (stores: DeploymentStores, gate: LeaseGate, prepareRpc: () => Promise<void>) =>
        new Renewal({
          settings: renewalSettings({ site, token: TOKEN, before: { ms: 6 * HOUR_MS }, ratePerMinute: 10, maxInFlight: 10 }),
          gate,
          registry: stores.registry,
          store: stores.renewal,
          rpc,
          prepareRpc,
          clock: time,
          logger: new RecordingLogger(),
          metrics,
        });
      // A is deposed after it reserved its hosts and before its first request leaves: its lease runs
      // out on its own clock and B claims the site.
      const byA = renewalOf(storesA, a.gate, async () => {
        time.jump(PAST_TAKEOVER_BOUND_MS);
        bTermBeganAt = time.now();
        b = await elected(site, "deployment-b", storesB.lease, time);
      });

      // Act
      const resultA = await byA.run({ remainingMs: () => 60_000 });
      // Anything A had let go would reach a node well within this.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const fromA = fleet.record.filter((entry) => entry.action === "reprovision");
      const seenByB = await storesB.registry.expiries();
      const resultB = await renewalOf(storesB, b!.gate, async () => undefined).run({ remainingMs: () => 60_000 });

      // Assert: A reserved every host, sent none, and freed them; B found A's hosts in the shared
      // table and renewed every one under its term, and the site's renewal state there shows them in flight under it.
      expect(b!.term).toBe(a.term + 1);
      expect(fromA).toEqual([]);
      expect(resultA).toMatchObject({ status: "ran", term: a.term, sent: [], refused: [], inFlight: 0 });
      expect(seenByB.map((host) => ({ identity: host.identity, expiresAt: host.credentials.expiresAt })).sort((x, y) => (x.identity < y.identity ? -1 : 1))).toEqual(
        [...fleet.identities].sort().map((identity) => ({ identity, expiresAt })),
      );
      expect(resultB).toMatchObject({ status: "ran", term: b!.term, refused: [] });
      const ran = fleet.record.filter((entry) => entry.action === "reprovision");
      expect(ran.map((entry) => entry.identity).sort()).toEqual([...fleet.identities].sort());
      expect(ran.every((entry) => entry.outcome === 0 && entry.timeMs >= bTermBeganAt)).toBe(true);
      const { state } = await storesA.renewal.read(site);
      expect(Object.keys(state.inFlight).sort()).toEqual([...fleet.identities].sort());
      expect(Object.values(state.inFlight).every((held) => held.term === b!.term)).toBe(true);
      await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).inProvisioningMode), 10_000);
    } finally {
      await fleet.stop();
    }
  });
});
