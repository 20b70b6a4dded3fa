/**
 * Lease-store faults under the real App (a stalled store, a connection blip; docs/lease.md): the deployment's path to
 * DynamoDB Local runs through a loopback proxy that can stall (TCP open, no bytes) or blip (reset
 * connections, refuse new ones). A stalled store must close the gate within the round bound, not
 * hang; a blip at the start of a provision batch must return every item to the queue with its
 * reason, never delete it; an attempt no lease validity can cover must park the host in the DLQ
 * with the reason instead of leaving it "paused" forever.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createApp, type App } from "../../../dev/local/create-app";
import { loadConfig } from "../../../lib/config/load";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { silentLogger } from "../../../lib/ports/logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { deliverOnce, receive, remainingTime, servicesForSuite, type Queues } from "../../support/aws";
import { localAppSettings } from "../../support/app-settings";
import { hostAndPort, startStallProxy, type StallProxy } from "../../support/stall-proxy";
import { cleanupsAfterEach } from "../../support/suite";
import { recordScenario } from "../../support/chaos/scenario";
import { CountingHelper } from "../../support/chaos/support";

const TOKEN = "chaos-store-token";

const services = servicesForSuite();
const cleanups = cleanupsAfterEach();

interface Rig {
  app: App;
  /** Another container of the same deployment, started now (a cold start). */
  coldApp(): Promise<App>;
  fleet: Fleet;
  queues: Queues;
  proxy: StallProxy;
  site: string;
}

async function rig(nodes: number, configOverride: { helperTimeoutMs?: number } = {}): Promise<Rig> {
  const prefix = `store-${randomUUID().slice(0, 8)}`;
  const resources = await services.resources(prefix);
  const proxy = await startStallProxy(hostAndPort(services.dynamoEndpoint));
  const { queues } = resources;
  const fleet = await startFleet({ natsUrl: services.nats.url, count: nodes, identityPrefix: `${prefix}-n`, token: TOKEN, restartDelayMs: 20, recordDiscovery: false });
  const yaml = [
    `site: ${prefix}`,
    `deployment_id: ${prefix}-deployment`,
    "helper: /bin/false",
    "choria_insecure: true",
    "leader_election: true",
    "workers: 10",
    `token: ${TOKEN}`,
    `broker_urls: ["${services.nats.url}"]`,
  ].join("\n");
  const settings = localAppSettings(yaml, { ...resources, dynamoEndpoint: `http://${proxy.address}` }, { serviceName: "store", metricsNamespace: "Chaos" });
  // A configuration the config module may refuse at load time is still possible at run time (an
  // older build, a hand-made config): the runtime must park, not spin.
  const config = { ...(await loadConfig({ env: settings.configEnv })), ...configOverride };
  const helper = new CountingHelper();
  const container = async () => {
    const app = await createApp(settings, { config, metrics: new InMemoryMetrics(prefix), logger: silentLogger, helper });
    cleanups.push(() => app.close());
    return app;
  };
  const app = await container();
  cleanups.push(
    () => fleet.stop(),
    async () => {
      proxy.thaw();
      await proxy.close();
    },
  );
  return { app, coldApp: container, fleet, queues, proxy, site: prefix };
}

async function deliver(app: App, queueUrl: string, budgetMs = 60_000): Promise<{ received: number; failed: number }> {
  const { received, failed } = await deliverOnce(services.sqsApi, queueUrl, (event) => app.handleHostWorkBatch(event, { remainingMs: remainingTime(budgetMs) }));
  return { received, failed };
}

const ctx = () => ({ remainingMs: remainingTime(60_000) });
const configures = (fleet: Fleet, identity: string) => fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;
const unprovisioned = (fleet: Fleet) => fleet.identities.filter((identity) => configures(fleet, identity) === 0);

async function drain(run: Rig, deadlineMs = 30_000): Promise<void> {
  const deadline = performance.now() + deadlineMs;
  while (unprovisioned(run.fleet).length > 0 && performance.now() < deadline) {
    const { received } = await deliver(run.app, run.queues.hostWork);
    if (received === 0) await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe("lease store faults", () => {
  it("a stalled path to DynamoDB closes the gate within the round bound: discovery reports paused instead of hanging", async ({ task }) => {
    // Arrange
    const run = await rig(2);
    await run.app.discover(ctx());
    run.proxy.freeze();

    // Act
    const result = await run.app.discover(ctx());

    // Assert
    expect(result.paused).toBe(true);
    run.proxy.thaw();
    await drain(run);
    expect(unprovisioned(run.fleet)).toEqual([]);
    recordScenario(task, { area: "infrastructure", load: 2, faults: 1, hostsLost: unprovisioned(run.fleet).length });
  });

  it("a store blip at the start of a provision batch is waited out in the invocation: every host of the batch is configured, none goes back", async ({ task }) => {
    // Arrange
    const run = await rig(6);
    const discovered = await run.app.discover(ctx());
    const provision = await run.coldApp();
    run.proxy.blip(3_000);

    // Act: a cold provision container's batch meets the blip; it reads the standing again after the pauses.
    const blipped = await deliver(provision, run.queues.hostWork);

    const configuredInThatInvocation = run.fleet.identities.length - unprovisioned(run.fleet).length;
    await drain(run);

    // Assert: observed at the nodes (the batch's hosts configured by that one invocation) and at the DLQ.
    expect(discovered.admitted).toBe(6);
    expect(blipped.received).toBeGreaterThan(0);
    expect(blipped.failed).toBe(0);
    expect(configuredInThatInvocation).toBe(blipped.received);
    expect(unprovisioned(run.fleet)).toEqual([]);
    expect(await receive(services.sqsApi, run.queues.hostWorkDlq, 10)).toEqual([]);
    recordScenario(task, { area: "infrastructure", load: 6, faults: 1, hostsLost: unprovisioned(run.fleet).length });
  });

  it("a store blip at the start of a provision batch with no time left to read the lease again returns every item to the queue; none is deleted and every host ends configured", async ({ task }) => {
    // Arrange
    const run = await rig(6);
    const discovered = await run.app.discover(ctx());
    const provision = await run.coldApp();
    run.proxy.blip(3_000);

    // Act: 1.5 s left, less the 1 s margin: shorter than the first pause before a re-read.
    const blipped = await deliver(provision, run.queues.hostWork, 1_500);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await drain(run);

    // Assert
    expect(discovered.admitted).toBe(6);
    expect(blipped.received).toBeGreaterThan(0);
    expect(blipped.failed).toBe(blipped.received);
    expect(unprovisioned(run.fleet)).toEqual([]);
    expect(await receive(services.sqsApi, run.queues.hostWorkDlq, 10)).toEqual([]);
    recordScenario(task, { area: "infrastructure", load: 6, faults: 1, hostsLost: unprovisioned(run.fleet).length });
  });

  it("a lease round that outlives its bound and completes during the next invocation does not make the holder a standby: every host of that batch is provisioned", async ({ task }) => {
    // Arrange: five hosts queued by the leader; then one invocation's lease keep applies but
    // every answer about the lease item is held (the keep, its retry, the settling read), so the
    // round outlives its bound (the invocation reports paused) and is still in flight when the
    // next invocation, a provision batch, starts. The pause switch (another key) still answers.
    const run = await rig(5);
    const discovered = await run.app.discover(ctx());
    const held = run.proxy.holdResponsesTo(`{"S":"${run.site}"}`);
    const late = await run.app.discover(ctx());
    await held;

    // Act: the path heals while the batch's standing is being decided, so the late round lands inside it.
    const batch = await deliverOnce(services.sqsApi, run.queues.hostWork, (event) => {
      const handled = run.app.handleHostWorkBatch(event, { remainingMs: remainingTime(60_000) });
      setTimeout(() => run.proxy.thaw(), 150);
      return handled;
    });
    await drain(run, 20_000);

    // Assert: observed at the nodes (configured) and the queues (nothing parked, nothing left behind).
    expect(discovered.admitted).toBe(5);
    expect(late.paused).toBe(true);
    expect(batch.received).toBe(5);
    expect(unprovisioned(run.fleet)).toEqual([]);
    expect(await receive(services.sqsApi, run.queues.hostWorkDlq, 10)).toEqual([]);
    recordScenario(task, { area: "infrastructure", load: 5, faults: 1, hostsLost: unprovisioned(run.fleet).length });
  });

  it("a helper_timeout no lease validity can cover parks the host in the DLQ with the reason instead of pausing it forever", async ({ task }) => {
    // Arrange: lease 30 s minus 5 s skew leaves 25 s; the helper may take 26 s.
    const run = await rig(1, { helperTimeoutMs: 26_000 });
    await run.app.discover(ctx());

    // Act
    const first = await deliver(run.app, run.queues.hostWork);

    // Assert
    expect(first).toEqual({ received: 1, failed: 0 });
    const parked = await receive(services.sqsApi, run.queues.hostWorkDlq, 10);
    expect(parked.map((message) => message.MessageAttributes?.reason?.StringValue)).toEqual([expect.stringMatching(/^helper: .*cannot fit in one lease validity/)]);
    expect(configures(run.fleet, run.fleet.identities[0] as string)).toBe(0);
    recordScenario(task, { area: "config", load: 1, faults: 1, hostsLost: 0 });
  });
});
