/**
 * The lifecycle bridge of a leader and of a standby deployment of one site, deployed as production
 * deploys them: separate queues and registries, one shared lease table, the production consumer
 * name (`provisioner-<site>`, the same for every deployment). A paused deployment's bridge must be
 * inert, and events SQS refuses must go to the lifecycle DLQ without holding back the rest.
 */
import { randomUUID } from "node:crypto";
import { connect, RetentionPolicy, type NatsConnection } from "nats";
import { afterAll, describe, expect, it } from "vitest";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { DynamoDbPauseStore } from "../../../lib/dynamodb/pause-store";
import { startNats, type RunningNats } from "../../../dev/local/services";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { createTables, receive, localAwsForSuite, type Queues } from "../../support/aws";
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

const subjects = async (queueUrl: string) => (await receive(aws.sqsApi, queueUrl, 1_000)).map((message) => JSON.parse(message.Body ?? "{}").subject as string);

describe("an inert standby", () => {
  it("with JetStream: the paused deployment's bridge pulls nothing from the shared consumer; the leader forwards every event", async () => {
    // Arrange
    const { site, nc, leader, standby } = await startSite(true);
    const js = nc.jetstream();
    for (let index = 0; index < EVENTS; index++) await js.publish(SUBJECT, startup(`js${index}.example.net`));

    // Act: both bridges run at once, as their schedules would.
    const [ledRun, pausedRun] = await Promise.all([
      leader.app.bridgeLifecycle({ remainingMs: () => 4_000 }),
      standby.app.bridgeLifecycle({ remainingMs: () => 4_000 }),
    ]);

    // Assert
    expect(pausedRun).toMatchObject({ mode: "jetstream", forwarded: 0, paused: true });
    expect(ledRun).toMatchObject({ mode: "jetstream", forwarded: EVENTS, paused: false });
    expect(await subjects(standby.queues.lifecycle)).toEqual([]);
    expect((await subjects(leader.queues.lifecycle)).length).toBe(EVENTS);
    const consumers = await (await nc.jetstreamManager()).consumers.list("CHORIA_LIFECYCLE").next();
    expect(consumers.map((consumer) => consumer.name)).toEqual([`provisioner-${site}`]);
  });

  it("with JetStream: events published while only a standby runs wait in the stream for the leader", async () => {
    // Arrange
    const { nc, leader, standby } = await startSite(true);
    const js = nc.jetstream();
    await leader.app.bridgeLifecycle({ remainingMs: () => 3_100 }); // creates the shared consumer
    for (let index = 0; index < 5; index++) await js.publish(SUBJECT, startup(`later${index}.example.net`));

    // Act
    const pausedRun = await standby.app.bridgeLifecycle({ remainingMs: () => 3_100 });
    const ledRun = await leader.app.bridgeLifecycle({ remainingMs: () => 3_500 });

    // Assert
    expect(pausedRun).toMatchObject({ forwarded: 0, paused: true });
    expect(ledRun).toMatchObject({ forwarded: 5 });
    expect(await subjects(standby.queues.lifecycle)).toEqual([]);
  });

  it("with JetStream: a leader the operator paused takes nothing from the shared consumer; the events wait in the stream for whoever leads", async () => {
    // Arrange: the leader created the shared consumer, then the operator paused it (its lease is still unexpired).
    const { site, leaseTable, nc, leader } = await startSite(true);
    const js = nc.jetstream();
    await leader.app.bridgeLifecycle({ remainingMs: () => 3_100 });
    const pauses = new DynamoDbPauseStore({ client: aws.dynamo, tableName: leaseTable });
    await pauses.write({ site, deploymentId: "east", paused: true, by: "test", reason: "maintenance", changedAt: Date.now() });
    for (let index = 0; index < 5; index++) await js.publish(SUBJECT, startup(`held${index}.example.net`));

    // Act
    const pausedRun = await leader.app.bridgeLifecycle({ remainingMs: () => 3_100 });

    // Assert: nothing reached the paused leader's queue; every event is still in the stream.
    expect(pausedRun).toMatchObject({ forwarded: 0, paused: true });
    expect(await subjects(leader.queues.lifecycle)).toEqual([]);
    const consumer = await (await nc.jetstreamManager()).consumers.info("CHORIA_LIFECYCLE", `provisioner-${site}`);
    expect(consumer.num_pending).toBe(5);
    expect(consumer.num_ack_pending).toBe(0);
  });

  it("with core NATS: the paused deployment does not subscribe, so the leader's bridge hears every event", async () => {
    // Arrange
    const { nc, leader, standby } = await startSite(false);

    // Act
    const runs = Promise.all([leader.app.bridgeLifecycle({ remainingMs: () => 5_000 }), standby.app.bridgeLifecycle({ remainingMs: () => 5_000 })]);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (let index = 0; index < EVENTS; index++) nc.publish(SUBJECT, startup(`core${index}.example.net`));
    await nc.flush();
    const [ledRun, pausedRun] = await runs;

    // Assert
    expect(pausedRun).toMatchObject({ mode: "core", forwarded: 0, paused: true });
    expect(ledRun).toMatchObject({ mode: "core", forwarded: EVENTS });
    expect(await subjects(standby.queues.lifecycle)).toEqual([]);
  });
});

describe("lifecycle events SQS refuses", () => {
  it("go to the lifecycle DLQ with the reason; the good events batched with them go through, and nothing is redelivered", async () => {
    // Arrange: 8 good events around one with a control character and one over 1 MiB.
    const { site, nc, leader } = await startSite(true);
    const js = nc.jetstream();
    const good = Array.from({ length: 8 }, (_, index) => `good${index}.example.net`);
    const encoder = new TextEncoder();
    await js.publish(SUBJECT, startup(good[0]!));
    await js.publish(SUBJECT, encoder.encode('{"bad":"\u0001"}'));
    for (const identity of good.slice(1, 4)) await js.publish(SUBJECT, startup(identity));
    await js.publish(SUBJECT, encoder.encode(`{"pad":"${"x".repeat(600_000)}"}`));
    await js.publish(SUBJECT, encoder.encode(`{"pad":"${"y".repeat(600_000)}"}`));
    for (const identity of good.slice(4)) await js.publish(SUBJECT, startup(identity));

    // Act
    const first = await leader.app.bridgeLifecycle({ remainingMs: () => 4_000 });
    const second = await leader.app.bridgeLifecycle({ remainingMs: () => 3_500 });

    // Assert
    expect(first).toMatchObject({ forwarded: 10, deadLettered: 1 });
    expect(second).toMatchObject({ forwarded: 0, deadLettered: 0 });
    const forwarded = await receive(aws.sqsApi, leader.queues.lifecycle, 100);
    expect(forwarded.map((message) => JSON.parse(message.Body ?? "{}").subject).filter(Boolean).sort()).toEqual([...good].sort());
    const letters = await receive(aws.sqsApi, leader.queues.lifecycleDlq, 100);
    expect(letters).toHaveLength(1);
    expect(letters[0]!.MessageAttributes?.reason?.StringValue).toMatch(/InvalidMessageContents: U\+0001/);
    expect(letters[0]!.MessageAttributes?.encoding?.StringValue).toBe("base64");
    expect(Buffer.from(letters[0]!.Body ?? "", "base64").toString()).toBe('{"bad":"\u0001"}');
    expect(leader.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered)).toBe(1);
    const consumer = await (await nc.jetstreamManager()).consumers.info("CHORIA_LIFECYCLE", `provisioner-${site}`);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.num_pending).toBe(0);
  });
});
