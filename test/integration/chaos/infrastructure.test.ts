/**
 * Infrastructure faults under the real App (createApp with its SQS, DynamoDB and NATS adapters):
 * nats-server restarted in the middle of provisioning, DynamoDB Local stopped and brought back,
 * SQS duplicates and redeliveries, Lambda deadlines cutting a host's sequence in half, and a
 * JetStream lifecycle consumer lagging behind a burst of events with poison among them. Work is
 * pulled from the queues the way the SQS event source mapping does it (receive, invoke, delete what
 * the handler did not report as failed). Nothing may be lost, dead-lettered without a reason, or
 * configured twice by duplicate deliveries.
 */
import { randomUUID } from "node:crypto";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSBatchResponse } from "aws-lambda";
import { connect, RetentionPolicy, StorageType } from "nats";
import { describe, expect, inject, it } from "vitest";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import { APP_DEFAULTS } from "../../../lib/aws/settings";
import { defaultConsumerName } from "../../../lib/nats/lifecycle-event-source";
import { createApp, type App } from "../../../dev/local/create-app";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { startDynamoDbLocal, type RunningDynamoDb } from "../../../dev/local/services";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { silentLogger } from "../../../lib/ports/logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { createQueues, createTables, deleteMessages, deliverOnce, dynamoClient, receive, remainingTime, servicesForSuite, sqsEvent, tickEvent, type Queues } from "../../support/aws";
import { localAppSettings } from "../../support/app-settings";
import { cleanupsAfterEach } from "../../support/suite";
import { recordScenario } from "../../support/chaos/scenario";
import { CountingHelper } from "../../support/chaos/support";

const TOKEN = "chaos-infrastructure-token";

const services = servicesForSuite();
const cleanups = cleanupsAfterEach();

interface Rig {
  site: string;
  app: App;
  fleet: Fleet;
  queues: Queues;
  helper: CountingHelper;
  metrics: InMemoryMetrics;
  dynamo: DynamoDBClient;
  tables: { lease: string; admission: string };
}

async function rig(options: { nodes: number; dynamoEndpoint?: string; leaderElection?: boolean }): Promise<Rig> {
  const prefix = `chaos-${randomUUID().slice(0, 8)}`;
  const endpoint = options.dynamoEndpoint ?? inject("dynamoEndpoint");
  const dynamo = dynamoClient(endpoint);
  const tables = await createTables(dynamo, prefix);
  const queues = createQueues(services.sqs, prefix);
  const fleet = await startFleet({ natsUrl: services.nats.url, count: options.nodes, identityPrefix: `${prefix}-n`, token: TOKEN, restartDelayMs: 20, recordDiscovery: false });
  const yaml = [
    `site: ${prefix}`,
    `deployment_id: ${prefix}-deployment`,
    "helper: /bin/false",
    "choria_insecure: true",
    `leader_election: ${options.leaderElection ?? true}`,
    "workers: 10",
    `token: ${TOKEN}`,
    "features: { jwt: true }",
    `jwt_verify_cert: "${fleet.signer.alg === "EdDSA" ? fleet.signer.publicKeyHex : ""}"`,
    `broker_urls: ["${services.nats.url}"]`,
  ].join("\n");
  const settings = localAppSettings(yaml, { queues, tables, dynamoEndpoint: endpoint, sqsUrl: services.sqs.url }, { serviceName: "chaos", metricsNamespace: "Chaos" });

  const helper = new CountingHelper();
  const metrics = new InMemoryMetrics(prefix);
  const app = await createApp(settings, { metrics, logger: silentLogger, helper });
  cleanups.push(() => fleet.stop(), () => app.close(), async () => dynamo.destroy());
  return { site: prefix, app, fleet, queues, helper, metrics, dynamo, tables };
}

/** One event-source-mapping poll: receive, invoke, delete every record not reported as failed. */
async function deliver(app: App, queueUrl: string, budgetMs = 60_000, max = 10): Promise<{ received: number; failed: number; response?: SQSBatchResponse }> {
  return deliverOnce(services.sqsApi, queueUrl, (event) => app.handleHostWorkBatch(event, { remainingMs: remainingTime(budgetMs) }), max);
}

const configures = (fleet: Fleet, identity: string) => fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;
const unprovisioned = (fleet: Fleet) => fleet.identities.filter((identity) => configures(fleet, identity) === 0);
const ctx = (budgetMs = 60_000) => ({ remainingMs: remainingTime(budgetMs) });

/** Discover and drain the host-work queue until every node is configured (or the deadline passes). */
async function provisionEverything(run: Rig, deadlineMs = 30_000): Promise<void> {
  const deadline = performance.now() + deadlineMs;
  while (unprovisioned(run.fleet).length > 0 && performance.now() < deadline) {
    const { received } = await deliver(run.app, run.queues.hostWork);
    if (received === 0) {
      await run.app.discover(ctx());
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

async function deadLetters(queueUrl: string): Promise<Array<{ body: string; reason: string | undefined }>> {
  return (await receive(services.sqsApi, queueUrl, 100)).map((message) => ({ body: message.Body ?? "", reason: message.MessageAttributes?.reason?.StringValue }));
}

describe("infrastructure faults", () => {
  it("nats-server restarted mid-run: connections come back, interrupted hosts are retried, none lost", async ({ task }) => {
    // Arrange
    const run = await rig({ nodes: 20 });
    await run.app.discover(ctx());
    await deliver(run.app, run.queues.hostWork, 60_000, 5);

    // Act
    const restarting = services.nats.restart();
    const during = deliver(run.app, run.queues.hostWork, 60_000, 5);
    await restarting;
    await during;
    await provisionEverything(run);

    // Assert
    expect(unprovisioned(run.fleet)).toEqual([]);
    expect(await deadLetters(run.queues.hostWorkDlq)).toEqual([]);
    const extra = run.fleet.identities.reduce((sum, identity) => sum + configures(run.fleet, identity) - 1, 0);
    recordScenario(task, { area: "infrastructure", load: run.fleet.identities.length, faults: 1, hostsLost: unprovisioned(run.fleet).length, duplicateSends: extra });
  });

  it("SQS duplicates and redeliveries of the same host work configure each node once", async ({ task }) => {
    // Arrange
    const run = await rig({ nodes: 6 });
    await run.app.discover(ctx());
    const originals = await receive(services.sqsApi, run.queues.hostWork, 10);
    const bodies = originals.map((message) => message.Body ?? "");
    // Every message three times over, as an at-least-once queue may deliver it.
    for (const body of [...bodies, ...bodies]) await services.sqsApi.send(new SendMessageCommand({ QueueUrl: run.queues.hostWork, MessageBody: body }));
    await deleteMessages(services.sqsApi, run.queues.hostWork, originals);
    for (const body of bodies) await services.sqsApi.send(new SendMessageCommand({ QueueUrl: run.queues.hostWork, MessageBody: body }));

    // Act
    const deadline = performance.now() + 20_000;
    let delivered = 0;
    while (performance.now() < deadline) {
      const { received } = await deliver(run.app, run.queues.hostWork, 60_000, 10);
      delivered += received;
      if (received === 0 && unprovisioned(run.fleet).length === 0 && (await receive(services.sqsApi, run.queues.hostWork, 1)).length === 0) break;
    }
    // A redelivery long after the host was provisioned.
    for (const body of bodies) await services.sqsApi.send(new SendMessageCommand({ QueueUrl: run.queues.hostWork, MessageBody: body }));
    const late = await deliver(run.app, run.queues.hostWork, 60_000, 10);

    // Assert
    expect(unprovisioned(run.fleet)).toEqual([]);
    for (const identity of run.fleet.identities) expect(configures(run.fleet, identity), identity).toBe(1);
    expect(late.failed).toBe(0);
    expect(bodies.map((body) => decodeHostWork(body).identity).sort()).toEqual([...run.fleet.identities].sort());
    recordScenario(task, { area: "infrastructure", load: bodies.length, faults: delivered + late.received - bodies.length, hostsLost: 0, duplicateSends: 0 });
  });

  it("Lambda deadline mid-sequence: the host goes back to the queue with its reason and finishes later under the same lock holder", async ({ task }) => {
    // Arrange
    const run = await rig({ nodes: 3 });
    await run.app.discover(ctx());
    let budget = 60_000;
    // The helper runs after jwt (which takes the node's provisioning lock); from then the invocation has 5 s left.
    run.helper.onRun = () => {
      budget = 5_000;
    };
    const messages = await receive(services.sqsApi, run.queues.hostWork, 10);

    // Act
    const first = await run.app.handleHostWorkBatch(sqsEvent(messages, run.queues.hostWork), { remainingMs: () => budget });
    const status = await run.app.status();
    run.helper.onRun = undefined;
    await provisionEverything(run, 20_000);

    // Assert
    expect(first.batchItemFailures.length).toBe(messages.length);
    expect(status.registry.lastErrors.map((entry) => entry.lastError).join("\n")).toMatch(/not enough time left for choria_provision#configure/);
    expect(unprovisioned(run.fleet)).toEqual([]);
    for (const identity of run.fleet.identities) {
      expect(configures(run.fleet, identity), identity).toBe(1);
      expect(run.fleet.record.filter((entry) => entry.identity === identity && entry.statusmsg === "Could not obtain provisioning lock")).toEqual([]);
    }
    recordScenario(task, { area: "infrastructure", load: messages.length, faults: messages.length, hostsLost: 0 });
  });

  it("DynamoDB stopped and brought back: paused while it is down, nothing sent without a claim, everything provisioned after", async ({ task }) => {
    // Arrange
    const own: RunningDynamoDb = await startDynamoDbLocal();
    cleanups.push(() => own.stop());
    const run = await rig({ nodes: 8, dynamoEndpoint: own.url });
    await run.app.discover(ctx());
    const sentBefore = run.fleet.record.length;

    // Act
    await own.stop();
    const pausedDiscovery = await run.app.discover(ctx());
    const during = await deliver(run.app, run.queues.hostWork, 60_000, 10);
    const sentDuring = run.fleet.record.length - sentBefore;
    await own.restart();
    // DynamoDB Local keeps its tables in memory: bring the (empty) tables back as a durable table would be.
    await createTables(run.dynamo, run.tables.lease.replace(/-lease$/, ""));
    await provisionEverything(run, 30_000);

    // Assert
    expect(pausedDiscovery.paused).toBe(true);
    expect(during.received).toBeGreaterThan(0);
    expect(sentDuring).toBe(0);
    expect(unprovisioned(run.fleet)).toEqual([]);
    expect(await deadLetters(run.queues.hostWorkDlq)).toEqual([]);
    for (const identity of run.fleet.identities) expect(configures(run.fleet, identity), identity).toBe(1);
    recordScenario(task, { area: "infrastructure", load: run.fleet.identities.length, faults: 1, hostsLost: 0 });
  });

  it("JetStream consumer lag with poison events: ticks catch up across runs, admit each event once, park the poison with a reason", async ({ task }) => {
    // Arrange
    const run = await rig({ nodes: 1 });
    const nc = await connect({ servers: services.nats.url });
    cleanups.push(() => nc.close());
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: APP_DEFAULTS.lifecycleStream, subjects: ["choria.lifecycle.event.>"], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
    cleanups.push(() => jsm.streams.delete(APP_DEFAULTS.lifecycleStream));
    const subject = lifecycleSubject("startup", "provision_mode_server");
    const valid = Array.from({ length: 150 }, (_, index) => `lagging-${index}.example.net`);
    const poison = ["*", "evil.>", "a..b", "white space"];
    for (const identity of [...valid, ...poison]) {
      const event = buildLifecycleEvent({ type: "startup", identity, component: "provision_mode_server", version: "0.30.0", timestampMs: Date.now() });
      await nc.jetstream().publish(subject, encodeLifecycleEvent(event, "cloudevents"));
    }
    await nc.jetstream().publish(subject, new TextEncoder().encode("{not json"));

    // A tick takes events only while its deployment leads (a paused one is inert): a discovery wins
    // the lease first, and finds the fleet's one node.
    expect((await run.app.discover(ctx())).paused).toBe(false);

    // Act: ticks with little time left, each cut short by its deadline, until the consumer has caught up.
    const consumer = defaultConsumerName(run.site);
    let runs = 0;
    let waiting = Number.POSITIVE_INFINITY;
    while (waiting > 0 && runs < 10) {
      const response = await run.app.handleLifecycleBatch(tickEvent(run.queues.lifecycle), ctx(3_100));
      expect(response.batchItemFailures).toEqual([]);
      runs += 1;
      const info = await jsm.consumers.info(APP_DEFAULTS.lifecycleStream, consumer).catch(() => undefined);
      waiting = info ? info.num_pending + info.num_ack_pending : Number.POSITIVE_INFINITY;
    }
    const parked = await deadLetters(run.queues.lifecycleDlq);
    const queuedWork = (await receive(services.sqsApi, run.queues.hostWork, 1_000)).map((message) => encodeHostWork(decodeHostWork(message.Body ?? "")));

    // Assert: the consumer has nothing left, nothing went through the lifecycle queue, every valid
    // event became host work once, and the poison is parked with the reason.
    expect(waiting).toBe(0);
    expect(await receive(services.sqsApi, run.queues.lifecycle, 10)).toEqual([]);
    expect(parked.length).toBe(poison.length + 1);
    for (const entry of parked) expect(entry.reason).toMatch(/^invalid lifecycle event: /);
    // The discovery that won the term found the fleet's one node.
    expect(queuedWork.map((body) => decodeHostWork(body).identity).sort()).toEqual([...valid, ...run.fleet.identities].sort());
    recordScenario(task, { area: "infrastructure", load: valid.length, faults: runs, badInputs: poison.length + 1, hostsLost: valid.length + run.fleet.identities.length - queuedWork.length });
  });
});
