/**
 * Two stacks of one site in one Region and account, deployed with default settings (no
 * `deployment_id` in the file) and sharing the site's lease table: each gets the deployment id its
 * stack derives (`<stage>/<Region>/<account>`, as serverless.yml sets STACK_DEPLOYMENT_ID), so
 * exactly one of them leads. Observed at the nodes: each node is configured once, and the standby
 * shows up in the lease item as a peer the leader reports.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createApp, type App } from "../../../dev/local/create-app";
import { createAdmissionTable } from "../../../dev/local/resources";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { silentLogger } from "../../../lib/ports/logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { createTables, deliverOnce, remainingTime, servicesForSuite, type Queues } from "../../support/aws";
import { localAppSettings } from "../../support/app-settings";
import { cleanupsAfterEach } from "../../support/suite";
import { HELPER, TOKEN } from "../../support/handlers";

const services = servicesForSuite();
const cleanups = cleanupsAfterEach();
const NODES = 3;
const REGION = "eu-west-1";
const ACCOUNT = "123456789012";

interface Stack {
  app: App;
  queues: Queues;
  metrics: InMemoryMetrics;
}

/** A stack as serverless.yml deploys it: the file has no deployment_id; the stack's environment derives one. */
async function stack(site: string, stage: string, leaseTable: string): Promise<Stack> {
  const tables = { lease: leaseTable, admission: `${site}-${stage}-admission` };
  await createAdmissionTable(services.dynamo, tables.admission);
  const resources = await services.resources(`${site}-${stage}`, tables);
  const yaml = [`site: ${site}`, `helper: ${HELPER}`, `token: ${TOKEN}`, "choria_insecure: true", "leader_election: true", `broker_urls: ["${services.nats.url}"]`].join("\n");
  const settings = localAppSettings(yaml, resources, { retryMaxDelaySeconds: 2 });
  settings.configEnv = { ...settings.configEnv, AWS_REGION: REGION, STACK_DEPLOYMENT_ID: `${stage}/${REGION}/${ACCOUNT}` };
  const metrics = new InMemoryMetrics(site);
  const app = await createApp(settings, { metrics, logger: silentLogger });
  cleanups.push(() => app.close());
  return { app, queues: resources.queues, metrics };
}

const configures = (fleet: Fleet, identity: string) => fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;

describe("two stacks of one site with default settings and a shared lease table", () => {
  it("never both configure a node: one leads, and the leader reports the other as a peer lease.peers does not name", async () => {
    // Arrange: the nodes stay in provisioning mode for a while after a restart request, so a second
    // leader working at the same time would configure each of them too.
    const site = `stacks-${randomUUID().slice(0, 8)}`;
    const shared = await createTables(services.dynamo, site);
    const fleet = await startFleet({ natsUrl: services.nats.url, count: NODES, identityPrefix: `${site}-n`, token: TOKEN, restartDelayMs: 3_000, recordDiscovery: false });
    cleanups.push(() => fleet.stop());
    const blue = await stack(site, "blue", shared.lease);
    const green = await stack(site, "green", shared.lease);

    // Act: both discover, then both work their queues at the same time, as their schedules would.
    const discovered = [await blue.app.discover({ remainingMs: () => 10_000 }), await green.app.discover({ remainingMs: () => 10_000 })];
    const work = (s: Stack) => deliverOnce(services.sqsApi, s.queues.hostWork, (event) => s.app.handleHostWorkBatch(event, { remainingMs: remainingTime(30_000) }));
    await Promise.all([work(blue), work(green)]);
    await blue.app.discover({ remainingMs: () => 10_000 });

    // Assert
    expect(fleet.identities.map((identity) => configures(fleet, identity))).toEqual(fleet.identities.map(() => 1));
    expect(discovered.map((result) => result.paused)).toEqual([false, true]);
    const item = await new DynamoDbLeaseStore({ client: services.dynamo, tableName: shared.lease }).read(site);
    expect(item?.holder).toBe(`blue/${REGION}/${ACCOUNT}`);
    expect(Object.keys(item?.peers ?? {}).sort()).toEqual([`blue/${REGION}/${ACCOUNT}`, `green/${REGION}/${ACCOUNT}`]);
    expect(blue.metrics.total(EXTRA_METRIC.leaseUnknownPeers)).toBeGreaterThan(0);
  });
});
