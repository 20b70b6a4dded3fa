/**
 * The ticks of a leader and of a standby deployment of one site, deployed as production deploys
 * them: separate queues and registries, one shared lease table, the production consumer name
 * (`provisioner-<site>`, the same for every deployment). A tick bridges (takes the startup events
 * and admits them in-process) only while its deployment leads: a standby's or a paused
 * deployment's tick must be inert. Events admission cannot take go to the lifecycle DLQ with the
 * reason without holding back the rest.
 */
import { randomUUID } from "node:crypto";
import { connect, RetentionPolicy, type NatsConnection } from "nats";
import { afterAll, describe, expect, it } from "vitest";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { DynamoDbPauseStore } from "../../../lib/dynamodb/pause-store";
import { startNats, type RunningNats } from "../../../dev/local/services";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { createTables, receive, localAwsForSuite, tickEvent, type Queues } from "../../support/aws";
import { startDeployment, type Deployment } from "../../support/handlers";

const SUBJECT = lifecycleSubject("startup", "provision_mode_server");
const EVENTS = 40;

const aws = localAwsForSuite();
const cleanups: Array<() => Promise<unknown>> = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

const startup = (identity: string) =>
  encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component: "provision_mode_server", timestampMs: Date.now() }), "cloudevents");

interface Site {
  site: string;
  leaseTable: string;
  nats: RunningNats;
  nc: NatsConnection;
  leader: Deployment & { queues: Queues };
  standby: Deployment & { queues: Queues };
}

/** Two deployments of a fresh site on their own broker; `leader` holds the lease (won by a discovery). */
async function startSite(withStream: boolean): Promise<Site> {
  const nats = await startNats();
  cleanups.push(() => nats.stop());
  const nc = await connect({ servers: nats.url });
  cleanups.push(() => nc.close());
  if (withStream) {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "CHORIA_LIFECYCLE", subjects: ["choria.lifecycle.event.>"], retention: RetentionPolicy.Limits });
  }
  const site = `bridge-${randomUUID().slice(0, 8)}`;
  const shared = await createTables(aws.dynamo, site);
  const deployment = async (id: string) => {
    // Each deployment has its own queues; the site's lease and admission tables are shared.
    const resources = await aws.resources(`${site}-${id}`, shared);
    const started = await startDeployment({ deploymentId: id, site, natsUrl: nats.url, resources });
    cleanups.push(() => started.app.close());
    return { ...started, queues: resources.queues };
  };
  const leader = await deployment("east");
  const standby = await deployment("west");
  expect((await leader.app.discover({ remainingMs: () => 10_000 })).paused).toBe(false);
  expect((await standby.app.discover({ remainingMs: () => 10_000 })).paused).toBe(true);
  return { site, leaseTable: shared.lease, nats, nc, leader, standby };
}

/** The identities of the host work queued on `queueUrl`. */
const admitted = async (queueUrl: string) => (await receive(aws.sqsApi, queueUrl, 1_000)).map((message) => decodeHostWork(message.Body ?? "").identity).sort();

/** One tick of `deployment`'s lifecycle function with `budgetMs` left to its invocation. */
async function tick(deployment: Deployment & { queues: Queues }, budgetMs: number): Promise<void> {
  const started = performance.now();
  const response = await deployment.app.handleLifecycleBatch(tickEvent(deployment.queues.lifecycle), { remainingMs: () => budgetMs - (performance.now() - started) });
  expect(response.batchItemFailures).toEqual([]);
}

const consumerInfo = async (nc: NatsConnection, site: string) => (await nc.jetstreamManager()).consumers.info("CHORIA_LIFECYCLE", `provisioner-${site}`);
const identities = (prefix: string, count: number) => Array.from({ length: count }, (_, index) => `${prefix}${index}.example.net`);

describe("an inert standby", () => {
  it("with JetStream: the standby's tick pulls nothing from the shared consumer; the leader's tick admits every event", async () => {
    // Arrange
    const { site, nc, leader, standby } = await startSite(true);
    const js = nc.jetstream();
    for (const identity of identities("js", EVENTS)) await js.publish(SUBJECT, startup(identity));

    // Act: both ticks at once, as their keepers' schedules may arm them.
    await Promise.all([tick(leader, 4_000), tick(standby, 4_000)]);

    // Assert
    expect(await admitted(standby.queues.hostWork)).toEqual([]);
    expect(await admitted(leader.queues.hostWork)).toEqual(identities("js", EVENTS).sort());
    expect(await receive(aws.sqsApi, leader.queues.lifecycle)).toEqual([]);
    const consumers = await (await nc.jetstreamManager()).consumers.list("CHORIA_LIFECYCLE").next();
    expect(consumers.map((consumer) => consumer.name)).toEqual([`provisioner-${site}`]);
    expect((await consumerInfo(nc, site)).num_ack_pending).toBe(0);
  });

  it("with JetStream: events published while only a standby ticks wait in the stream for the leader", async () => {
    // Arrange
    const { site, nc, leader, standby } = await startSite(true);
    const js = nc.jetstream();
    await tick(leader, 3_100); // creates the shared consumer
    for (const identity of identities("later", 5)) await js.publish(SUBJECT, startup(identity));

    // Act
    await tick(standby, 3_100);
    const waitingAfterStandby = (await consumerInfo(nc, site)).num_pending;
    await tick(leader, 3_500);

    // Assert
    expect(waitingAfterStandby).toBe(5);
    expect(await admitted(standby.queues.hostWork)).toEqual([]);
    expect(await admitted(leader.queues.hostWork)).toEqual(identities("later", 5).sort());
  });

  it("with JetStream: a leader the operator paused takes nothing from the shared consumer; the events wait in the stream for whoever leads", async () => {
    // Arrange: the leader created the shared consumer, then the operator paused it (its lease is still unexpired).
    const { site, leaseTable, nc, leader } = await startSite(true);
    const js = nc.jetstream();
    await tick(leader, 3_100);
    const pauses = new DynamoDbPauseStore({ client: aws.dynamo, tableName: leaseTable });
    await pauses.write({ site, deploymentId: "east", paused: true, by: "test", reason: "maintenance", changedAt: Date.now() });
    for (const identity of identities("held", 5)) await js.publish(SUBJECT, startup(identity));

    // Act
    await tick(leader, 3_100);

    // Assert: nothing admitted by the paused leader; every event is still in the stream.
    expect(await admitted(leader.queues.hostWork)).toEqual([]);
    const consumer = await consumerInfo(nc, site);
    expect(consumer.num_pending).toBe(5);
    expect(consumer.num_ack_pending).toBe(0);
  });

  it("with core NATS: the standby does not subscribe, so the leader's tick hears every event", async () => {
    // Arrange
    const { nc, leader, standby } = await startSite(false);

    // Act: both ticks at once; the leader's listens until shortly before its next tick (here its deadline).
    const runs = Promise.all([tick(leader, 5_000), tick(standby, 5_000)]);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const identity of identities("core", EVENTS)) nc.publish(SUBJECT, startup(identity));
    await nc.flush();
    await runs;

    // Assert
    expect(await admitted(standby.queues.hostWork)).toEqual([]);
    expect(await admitted(leader.queues.hostWork)).toEqual(identities("core", EVENTS).sort());
  });
});

describe("lifecycle events admission cannot take", () => {
  it("go to the lifecycle DLQ with the reason; the good events around them are admitted, and nothing is redelivered", async () => {
    // Arrange: 8 good events around two that are not lifecycle events (600 kB each).
    const { site, nc, leader } = await startSite(true);
    const js = nc.jetstream();
    const good = identities("good", 8);
    const encoder = new TextEncoder();
    for (const identity of good.slice(0, 4)) await js.publish(SUBJECT, startup(identity));
    await js.publish(SUBJECT, encoder.encode(`{"pad":"${"x".repeat(600_000)}"}`));
    await js.publish(SUBJECT, encoder.encode(`{"pad":"${"y".repeat(600_000)}"}`));
    for (const identity of good.slice(4)) await js.publish(SUBJECT, startup(identity));

    // Act
    await tick(leader, 4_000);
    await tick(leader, 3_500);

    // Assert
    expect(await admitted(leader.queues.hostWork)).toEqual([...good].sort());
    const letters = await receive(aws.sqsApi, leader.queues.lifecycleDlq, 100);
    expect(letters).toHaveLength(2);
    for (const letter of letters) expect(letter.MessageAttributes?.reason?.StringValue).toMatch(/^invalid lifecycle event: /);
    expect(letters.map((letter) => letter.Body?.slice(0, 9)).sort()).toEqual(['{"pad":"x', '{"pad":"y']);
    const consumer = await consumerInfo(nc, site);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.num_pending).toBe(0);
  });

  it("one whose bytes SQS refuses even in the DLQ comes back from the stream, and on its last delivery is dead-lettered base64-encoded with the reason", async () => {
    // Arrange: a control character, which SQS refuses in a message body, among good events.
    const { site, nc, leader } = await startSite(true);
    const js = nc.jetstream();
    const good = identities("fine", 3);
    await js.publish(SUBJECT, startup(good[0]!));
    await js.publish(SUBJECT, new TextEncoder().encode('{"bad":"\u0001"}'));
    for (const identity of good.slice(1)) await js.publish(SUBJECT, startup(identity));

    // Act: ticks a renew_interval apart (each looks once for events handed back, which come back 5 s later).
    const letters: Awaited<ReturnType<typeof receive>> = [];
    for (let ticks = 0; ticks < 8 && letters.length === 0; ticks++) {
      if (ticks > 0) await new Promise((resolve) => setTimeout(resolve, 5_500));
      await tick(leader, 4_000);
      letters.push(...(await receive(aws.sqsApi, leader.queues.lifecycleDlq, 10)));
    }

    // Assert: the good events were admitted at the first tick; the bad one is parked once, whole.
    expect(await admitted(leader.queues.hostWork)).toEqual([...good].sort());
    expect(letters).toHaveLength(1);
    expect(letters[0]!.MessageAttributes?.reason?.StringValue).toBe("admission did not take the lifecycle event on its last delivery");
    expect(letters[0]!.MessageAttributes?.encoding?.StringValue).toBe("base64");
    expect(Buffer.from(letters[0]!.Body ?? "", "base64").toString()).toBe('{"bad":"\u0001"}');
    expect(leader.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered)).toBe(1);
    const consumer = await consumerInfo(nc, site);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.num_pending).toBe(0);
  });
});
