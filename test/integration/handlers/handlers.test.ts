import { SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { decodeHostWork, encodeHostWork, type StatusReport } from "../../../lib/app";
import { buildLifecycleEvent, encodeLifecycleEvent } from "../../../lib/choria/lifecycle";
import { startNats, startSqs, type RunningNats, type RunningSqs } from "../../../dev/local/services";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as keeperHandler } from "../../../handlers/lease-keeper";
import { makeHandler as lifecycleHandler } from "../../../handlers/lifecycle";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { makeHandler as releaseHandler } from "../../../handlers/release";
import { makeHandler as reprovisionHandler } from "../../../handlers/reprovision";
import { makeHandler as statusHandler } from "../../../handlers/status";
import { createQueues, createTables, dynamoClient, lambdaContext, receive, sqsClient, sqsEvent, type Queues } from "../../support/aws";
import { realClock } from "../../support/fakes";
import { send, startDeployment, TOKEN, type Deployment } from "./support";

const SITE = "lab";
/** Shared by the apps and the fleet, so a test can let the lease run out without waiting. */
const time = realClock();
let nats: RunningNats;
let sqs: RunningSqs;
let sqsApi: SQSClient;
let dynamo: DynamoDBClient;
let fleet: Fleet;
let watcher: NatsConnection;
let leader: Deployment;
let standby: Deployment;
let leaderQueues: Queues;
let standbyQueues: Queues;
const provisionerStartups: string[] = [];

const handlers = (deployment: Deployment) => {
  const getApp = async () => deployment.app;
  return {
    discover: discoverHandler(getApp),
    keeper: keeperHandler(getApp),
    lifecycle: lifecycleHandler(getApp),
    provision: provisionHandler(getApp),
    status: statusHandler(getApp),
    reprovision: reprovisionHandler(getApp),
    release: releaseHandler(getApp),
  };
};

const configureCount = (identity: string) =>
  fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;

beforeAll(async () => {
  nats = await startNats();
  sqs = await startSqs();
  sqsApi = sqsClient(sqs.url);
  dynamo = dynamoClient(inject("dynamoEndpoint"));
  const tables = await createTables(dynamo, `handlers-${Date.now()}`);
  leaderQueues = createQueues(sqs, "leader");
  standbyQueues = createQueues(sqs, "standby");
  fleet = await startFleet({
    natsUrl: nats.url,
    identities: ["n1.example.net", "n2.example.net", "n3.example.net", "defer-n4.example.net"],
    token: TOKEN,
    restartDelayMs: 50,
    clock: time,
  });
  watcher = await connect({ servers: nats.url });
  watcher.subscribe("choria.lifecycle.event.startup.provisioner", {
    callback: (_error, message) => provisionerStartups.push(message.string()),
  });
  await watcher.flush();
  const common = { site: SITE, natsUrl: nats.url, dynamoEndpoint: inject("dynamoEndpoint"), sqsUrl: sqs.url, tables, clock: time };
  leader = await startDeployment({ ...common, deploymentId: "leader", queues: leaderQueues });
  standby = await startDeployment({ ...common, deploymentId: "standby", queues: standbyQueues });
});

afterAll(async () => {
  await leader?.app.close();
  await standby?.app.close();
  await fleet?.stop();
  await watcher?.close();
  sqsApi?.destroy();
  dynamo?.destroy();
  await sqs?.stop();
  await nats?.stop();
});

describe("the handlers against real NATS, DynamoDB Local and SQS", () => {
  it("discover takes the lease, announces the provisioner and queues term-stamped work for every node", async () => {
    const result = await handlers(leader).discover({}, lambdaContext());

    const messages = await receive(sqsApi, leaderQueues.hostWork);
    const work = messages.map((message) => decodeHostWork(message.Body ?? ""));
    expect(result).toMatchObject({ paused: false, discovered: 4, admitted: 4 });
    expect(work.map((entry) => entry.identity).sort()).toEqual([...fleet.identities].sort());
    expect(new Set(work.map((entry) => entry.term))).toEqual(new Set([result.term]));
    expect(work.every((entry) => entry.source === "discovery")).toBe(true);
    expect(leader.metrics.last(METRIC.paused)).toBe(0);
    expect(leader.metrics.total(METRIC.discovered)).toBe(4);
    expect(leader.metrics.total(METRIC.discoverCycles)).toBe(1);
    await fleet.waitFor(() => provisionerStartups.length === 1);

    // Hand the batch to the provision function, as the SQS event source mapping would.
    const response = await handlers(leader).provision(sqsEvent(messages, leaderQueues.hostWork), lambdaContext());

    const deferred = messages.find((message) => message.Body?.includes("defer-n4"));
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: deferred?.MessageId }]);
    for (const identity of ["n1.example.net", "n2.example.net", "n3.example.net"]) {
      expect(configureCount(identity)).toBe(1);
      await fleet.waitFor(() => fleet.node(identity).restarts === 1);
    }
    expect(leader.metrics.total(METRIC.provisioned)).toBe(3);
  });

  it("retried work comes back after its visibility delay and status shows why it failed", async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const again = await receive(sqsApi, leaderQueues.hostWork);
    const status = (await handlers(leader).status({}, lambdaContext())) as StatusReport;

    expect(again.map((message) => decodeHostWork(message.Body ?? "").identity)).toEqual(["defer-n4.example.net"]);
    expect(again[0]?.Attributes?.ApproximateReceiveCount).toBe("2");
    expect(status.lease).toMatchObject({ leader: "leader", heldByThisDeployment: true });
    expect(status.registry.byState.provisioned).toBe(3);
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "defer-n4.example.net", lastError: expect.stringContaining("defered") })]);
  });

  it("a duplicate in one batch and across concurrent batches never provisions a host twice", async () => {
    await fleet.addNodes(1);
    const identity = fleet.identities.at(-1) as string;
    const discoveredBefore = leader.metrics.total(METRIC.discovered);
    const rediscovery = await handlers(leader).discover({}, lambdaContext());
    const term = rediscovery.term as number;
    // Go's choria_provisioner_discovered counts hosts admitted, not replies: the deferred host
    // still answers discovery but is already known.
    expect(rediscovery).toMatchObject({ discovered: 2, admitted: 1 });
    expect(leader.metrics.total(METRIC.discovered) - discoveredBefore).toBe(1);
    const queued = (await receive(sqsApi, leaderQueues.hostWork)).filter((message) => message.Body?.includes(identity));
    const body = queued[0]?.Body ?? "";
    await send(sqsApi, leaderQueues.hostWork, body);
    await send(sqsApi, leaderQueues.hostWork, body);
    const copies = (await receive(sqsApi, leaderQueues.hostWork)).filter((message) => message.Body === body);

    const provision = handlers(leader).provision;
    const [first, second] = await Promise.all([
      provision(sqsEvent([...queued, copies[0]!], leaderQueues.hostWork), lambdaContext()),
      provision(sqsEvent([copies[1]!], leaderQueues.hostWork), lambdaContext()),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const redelivered = await receive(sqsApi, leaderQueues.hostWork);
    const later = await provision(sqsEvent(redelivered, leaderQueues.hostWork), lambdaContext());

    expect(decodeHostWork(body)).toMatchObject({ identity, term });
    expect(configureCount(identity)).toBe(1);
    expect(first.batchItemFailures.length + second.batchItemFailures.length).toBe(2);
    expect(redelivered.map((message) => message.Body)).toEqual([body, body]);
    expect(later.batchItemFailures).toEqual([]);
    expect(configureCount(identity)).toBe(1);
  });

  it("poison messages go to the DLQ with their reason and are acknowledged", async () => {
    await send(sqsApi, leaderQueues.hostWork, "not json");
    await send(sqsApi, leaderQueues.hostWork, JSON.stringify({ v: 1, identity: "bad*name", term: 1, admittedAt: 1, source: "discovery" }));
    const poison = await receive(sqsApi, leaderQueues.hostWork);

    const response = await handlers(leader).provision(sqsEvent(poison, leaderQueues.hostWork), lambdaContext());

    const dead = await receive(sqsApi, leaderQueues.hostWorkDlq);
    expect(response.batchItemFailures).toEqual([]);
    expect(dead.map((message) => message.Body).sort()).toEqual(poison.map((message) => message.Body).sort());
    expect(dead.map((message) => message.MessageAttributes?.reason?.StringValue).sort()).toEqual([
      'invalid host-work message: "identity" identity contains a NATS wildcard, whitespace or a control character',
      "invalid host-work message: not JSON",
    ]);
  });

  it("a deployment that does not hold the lease sends nothing to the fleet", async () => {
    const before = fleet.record.length;
    const leaderTerm = (await leader.app.status()).lease.term as number;
    await send(sqsApi, standbyQueues.hostWork, encodeHostWork({ identity: "n1.example.net", term: leaderTerm, admittedAt: Date.now(), source: "discovery" }));
    const work = await receive(sqsApi, standbyQueues.hostWork);
    const startup = encodeLifecycleEvent(
      buildLifecycleEvent({ type: "startup", identity: "n9.example.net", component: "provision_mode_server", timestampMs: Date.now() }),
      "cloudevents",
    );
    await send(sqsApi, standbyQueues.lifecycle, new TextDecoder().decode(startup));
    const events = await receive(sqsApi, standbyQueues.lifecycle);
    const standbyHandlers = handlers(standby);

    const discovered = await standbyHandlers.discover({}, lambdaContext());
    const provisioned = await standbyHandlers.provision(sqsEvent(work, standbyQueues.hostWork), lambdaContext());
    const lifecycle = await standbyHandlers.lifecycle(sqsEvent(events, standbyQueues.lifecycle), lambdaContext());

    expect(discovered).toEqual({ paused: true, discovered: 0, admitted: 0 });
    expect(provisioned.batchItemFailures).toEqual([]);
    expect(lifecycle.batchItemFailures).toEqual([]);
    expect(fleet.record.length).toBe(before);
    expect(await receive(sqsApi, standbyQueues.hostWork)).toEqual([]);
    expect(standby.metrics.last(METRIC.paused)).toBe(1);
    expect(standby.metrics.total(EXTRA_METRIC.lifecycleEventsDropped)).toBe(1);
  });

  it("the lifecycle handler admits startup events of the configured component only", async () => {
    const event = (type: "startup" | "shutdown", identity: string, component = "provision_mode_server", format: "choria" | "cloudevents" = "cloudevents") =>
      new TextDecoder().decode(encodeLifecycleEvent(buildLifecycleEvent({ type, identity, component, timestampMs: Date.now() }), format));
    await send(sqsApi, leaderQueues.lifecycle, event("startup", "e1.example.net", "provision_mode_server", "choria"));
    await send(sqsApi, leaderQueues.lifecycle, event("startup", "e2.example.net"));
    await send(sqsApi, leaderQueues.lifecycle, event("startup", "e2.example.net"));
    await send(sqsApi, leaderQueues.lifecycle, event("shutdown", "e3.example.net"));
    await send(sqsApi, leaderQueues.lifecycle, event("startup", "e4.example.net", "server"));
    await send(sqsApi, leaderQueues.lifecycle, "{\"protocol\":\"nonsense\"}");
    const messages = await receive(sqsApi, leaderQueues.lifecycle);

    const response = await handlers(leader).lifecycle(sqsEvent(messages, leaderQueues.lifecycle), lambdaContext());

    const work = (await receive(sqsApi, leaderQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    const dead = await receive(sqsApi, leaderQueues.lifecycleDlq);
    expect(response.batchItemFailures).toEqual([]);
    expect(work.map((entry) => [entry.identity, entry.source]).sort()).toEqual([
      ["e1.example.net", "event"],
      ["e2.example.net", "event"],
    ]);
    expect(dead.map((message) => message.MessageAttributes?.reason?.StringValue)).toEqual([
      'invalid lifecycle event: "protocol" names an unknown lifecycle event type: "nonsense"',
    ]);
    // Go counts choria_provisioner_event_discovered only when the event added the host.
    expect(leader.metrics.total(METRIC.eventDiscovered)).toBe(2);
  });

  it("reprovision admits known hosts again at once and rejects invalid names", async () => {
    const result = await handlers(leader).reprovision({ identities: ["n1.example.net", "not valid"] }, lambdaContext());

    const work = (await receive(sqsApi, leaderQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    expect(result.admitted).toEqual(["n1.example.net"]);
    expect(result.rejected).toEqual([{ identity: "not valid", reason: expect.stringContaining("whitespace") }]);
    expect(work).toEqual([expect.objectContaining({ identity: "n1.example.net", source: "operator" })]);
  });

  it("release hands the lease over: the standby's keeper wins the next term, announces itself and discovers", async () => {
    const leaderTerm = (await leader.app.status()).lease.term as number;
    await fleet.addNodes(1);
    const fresh = fleet.identities.at(-1) as string;
    const startupsBefore = provisionerStartups.length;

    const released = await handlers(leader).release({}, lambdaContext());
    const tooEarly = await handlers(standby).keeper({}, lambdaContext(4_500));
    // The old term's expiry, the skew bound and the delivery horizon (the request TTL) pass.
    time.jump(30_000 + 5_000 + 30_000 + 1_000);
    const kept = await handlers(standby).keeper({}, lambdaContext(4_500));

    const status = (await handlers(standby).status({}, lambdaContext())) as StatusReport;
    const work = (await receive(sqsApi, standbyQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    expect(released).toEqual({ released: true });
    expect(tooEarly.wonTerms).toEqual([]);
    expect(kept.wonTerms).toEqual([leaderTerm + 1]);
    expect(status.lease).toEqual(expect.objectContaining({ leader: "standby", term: leaderTerm + 1, heldByThisDeployment: true }));
    expect(work).toContainEqual(expect.objectContaining({ identity: fresh, term: leaderTerm + 1 }));
    await fleet.waitFor(() => provisionerStartups.length === startupsBefore + 1);
  });

  it("discover near its deadline queues nothing and leaves the hosts to the next discovery", async () => {
    await fleet.addNodes(2);
    const fresh = fleet.identities.slice(-2);

    const tooLate = await handlers(standby).discover({}, lambdaContext(2_500));
    const queuedTooLate = await receive(sqsApi, standbyQueues.hostWork);
    const inTime = await handlers(standby).discover({}, lambdaContext());
    const queuedInTime = (await receive(sqsApi, standbyQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));

    expect(tooLate).toMatchObject({ paused: false, admitted: 0 });
    expect(tooLate.discovered).toBeGreaterThanOrEqual(2);
    expect(queuedTooLate).toEqual([]);
    expect(inTime.admitted).toBeGreaterThanOrEqual(2);
    for (const identity of fresh) expect(queuedInTime).toContainEqual(expect.objectContaining({ identity }));
  });
});
