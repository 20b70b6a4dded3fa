import { randomUUID } from "node:crypto";
import { connect } from "nats";
import { beforeAll, describe, expect, it } from "vitest";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import type { StatusFunctionReport } from "../../../lib/app/operator/functions";
import { buildLifecycleEvent, encodeLifecycleEvent } from "../../../lib/choria/lifecycle";
import { startNats } from "../../../dev/local/services";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as keeperHandler } from "../../../handlers/lease-keeper";
import { makeHandler as lifecycleHandler } from "../../../handlers/lifecycle";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { makeHandler as releaseHandler } from "../../../handlers/release";
import { makeHandler as reprovisionHandler } from "../../../handlers/reprovision";
import { makeHandler as statusHandler } from "../../../handlers/status";
import { createTables, deleteMessages, lambdaContext, receive, sqsEvent, localAwsForSuite, type Queues, type Tables } from "../../support/aws";
import { realClock, type JumpingClock } from "../../support/fakes";
import { cleanupsAfterEach } from "../../support/suite";
import { send, startDeployment, TOKEN, type Deployment } from "../../support/handlers";

/** The fleet most tests start with: three nodes the example helper configures and one it defers. */
const FLEET = ["n1.example.net", "n2.example.net", "n3.example.net", "defer-n4.example.net"];

const aws = localAwsForSuite();
let tables: Tables;
const cleanups = cleanupsAfterEach();

beforeAll(async () => {
  tables = await createTables(aws.dynamo, `handlers-${Date.now()}`);
});

/**
 * One test's site: its own broker and fleet, a leader and a standby deployment (their own queues,
 * the suite's tables, a site of their own in them) and one clock for all of them, so a test can let
 * the lease run out without waiting. Nobody holds the lease yet.
 */
interface Site {
  fleet: Fleet;
  time: JumpingClock;
  leader: Deployment;
  standby: Deployment;
  leaderQueues: Queues;
  standbyQueues: Queues;
  /** The provisioner startup events heard on the broker, in order. */
  provisionerStartups: string[];
}

async function startSite(identities: string[]): Promise<Site> {
  const site = `lab-${randomUUID().slice(0, 8)}`;
  const time = realClock();
  const nats = await startNats();
  cleanups.push(() => nats.stop());
  const fleet = await startFleet({ natsUrl: nats.url, identities, token: TOKEN, restartDelayMs: 50, clock: time });
  cleanups.push(() => fleet.stop());
  const watcher = await connect({ servers: nats.url });
  cleanups.push(() => watcher.close());
  const provisionerStartups: string[] = [];
  watcher.subscribe("choria.lifecycle.event.startup.provisioner", {
    callback: (_error, message) => provisionerStartups.push(message.string()),
  });
  await watcher.flush();
  const deployment = async (deploymentId: string) => {
    const resources = await aws.resources(`${site}-${deploymentId}`, tables);
    const started = await startDeployment({ site, deploymentId, natsUrl: nats.url, resources, clock: time });
    cleanups.push(() => started.app.close());
    return { deployment: started, queues: resources.queues };
  };
  const leader = await deployment("leader");
  const standby = await deployment("standby");
  return { fleet, time, leader: leader.deployment, standby: standby.deployment, leaderQueues: leader.queues, standbyQueues: standby.queues, provisionerStartups };
}

/**
 * A keeper invocation with room for the discovery a won term starts. The keeper's round keeps the
 * 1 s deadline margin; the discovery keeps the 1 s deadline margin, collects replies for up to
 * `discovery_timeout` (2 s), and queues a chunk only with 2 s left, else leaves it to the next
 * discovery. With 4.5 s a loaded machine left the new node to the next discovery (a CI run beside
 * another suite and a real fleet); 15 s covers those bounds and the lease and queue writes.
 */
const KEEPER_BUDGET_FOR_A_WON_TERM_MS = 15_000;

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

const configureCount = (fleet: Fleet, identity: string) =>
  fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;

/** The leader discovers the fleet and provisions the batch; the example helper defers `defer-*` hosts. */
async function leaderProvisionsTheFleet(site: Site) {
  const discovered = await handlers(site.leader).discover({}, lambdaContext());
  const messages = await receive(aws.sqsApi, site.leaderQueues.hostWork);
  const response = await handlers(site.leader).provision(sqsEvent(messages, site.leaderQueues.hostWork), lambdaContext());
  return { discovered, messages, response };
}

describe("the handlers against real NATS, DynamoDB Local and SQS", () => {
  it("discover takes the lease, announces the provisioner and queues term-stamped work for every node", async () => {
    const { fleet, leader, leaderQueues, provisionerStartups } = await startSite(FLEET);

    const result = await handlers(leader).discover({}, lambdaContext());

    const messages = await receive(aws.sqsApi, leaderQueues.hostWork);
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
      expect(configureCount(fleet, identity)).toBe(1);
      await fleet.waitFor(() => fleet.node(identity).restarts === 1);
    }
    expect(leader.metrics.total(METRIC.provisioned)).toBe(3);
  });

  it("retried work comes back after its visibility delay and status shows why it failed", async () => {
    const site = await startSite(FLEET);
    const { leader, leaderQueues } = site;
    await leaderProvisionsTheFleet(site);

    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const again = await receive(aws.sqsApi, leaderQueues.hostWork);
    const status = (await handlers(leader).status({}, lambdaContext())) as StatusFunctionReport;

    expect(again.map((message) => decodeHostWork(message.Body ?? "").identity)).toEqual(["defer-n4.example.net"]);
    expect(again[0]?.Attributes?.ApproximateReceiveCount).toBe("2");
    expect(status.lease).toMatchObject({ leader: "leader", heldByThisDeployment: true });
    expect(status.registry.byState.provisioned).toBe(3);
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "defer-n4.example.net", lastError: expect.stringContaining("defered") })]);
  });

  it("a duplicate in one batch and across concurrent batches never provisions a host twice", async () => {
    // A deferred host: known to the registry, still answering discovery, its work out of the queue.
    const site = await startSite(["defer-n4.example.net"]);
    const { fleet, leader, leaderQueues } = site;
    const { messages } = await leaderProvisionsTheFleet(site);
    await deleteMessages(aws.sqsApi, leaderQueues.hostWork, messages);
    await fleet.addNodes(1);
    const identity = fleet.identities.at(-1) as string;
    const discoveredBefore = leader.metrics.total(METRIC.discovered);
    const rediscovery = await handlers(leader).discover({}, lambdaContext());
    const term = rediscovery.term as number;
    // Go's choria_provisioner_discovered counts hosts admitted, not replies: the deferred host
    // still answers discovery but is already known.
    expect(rediscovery).toMatchObject({ discovered: 2, admitted: 1 });
    expect(leader.metrics.total(METRIC.discovered) - discoveredBefore).toBe(1);
    const queued = (await receive(aws.sqsApi, leaderQueues.hostWork)).filter((message) => message.Body?.includes(identity));
    const body = queued[0]?.Body ?? "";
    await send(aws.sqsApi, leaderQueues.hostWork, body);
    await send(aws.sqsApi, leaderQueues.hostWork, body);
    const copies = (await receive(aws.sqsApi, leaderQueues.hostWork)).filter((message) => message.Body === body);

    const provision = handlers(leader).provision;
    const [first, second] = await Promise.all([
      provision(sqsEvent([...queued, copies[0]!], leaderQueues.hostWork), lambdaContext()),
      provision(sqsEvent([copies[1]!], leaderQueues.hostWork), lambdaContext()),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const redelivered = await receive(aws.sqsApi, leaderQueues.hostWork);
    const later = await provision(sqsEvent(redelivered, leaderQueues.hostWork), lambdaContext());

    expect(decodeHostWork(body)).toMatchObject({ identity, term });
    expect(configureCount(fleet, identity)).toBe(1);
    expect(first.batchItemFailures.length + second.batchItemFailures.length).toBe(2);
    expect(redelivered.map((message) => message.Body)).toEqual([body, body]);
    expect(later.batchItemFailures).toEqual([]);
    expect(configureCount(fleet, identity)).toBe(1);
  });

  it("poison messages go to the DLQ with their reason and are acknowledged", async () => {
    const { leader, leaderQueues } = await startSite([]);
    await send(aws.sqsApi, leaderQueues.hostWork, "not json");
    await send(aws.sqsApi, leaderQueues.hostWork, JSON.stringify({ v: 1, identity: "bad*name", term: 1, admittedAt: 1, source: "discovery" }));
    const poison = await receive(aws.sqsApi, leaderQueues.hostWork);

    const response = await handlers(leader).provision(sqsEvent(poison, leaderQueues.hostWork), lambdaContext());

    const dead = await receive(aws.sqsApi, leaderQueues.hostWorkDlq);
    expect(response.batchItemFailures).toEqual([]);
    expect(dead.map((message) => message.Body).sort()).toEqual(poison.map((message) => message.Body).sort());
    expect(dead.map((message) => message.MessageAttributes?.reason?.StringValue).sort()).toEqual([
      'invalid host-work message: "identity" identity contains a NATS wildcard, whitespace or a control character',
      "invalid host-work message: not JSON",
    ]);
  });

  it("a deployment that does not hold the lease sends nothing to the fleet", async () => {
    const { fleet, leader, standby, standbyQueues } = await startSite(FLEET);
    expect((await handlers(leader).discover({}, lambdaContext())).paused).toBe(false);
    const before = fleet.record.length;
    const leaderTerm = (await leader.app.status()).lease.term as number;
    await send(aws.sqsApi, standbyQueues.hostWork, encodeHostWork({ identity: "n1.example.net", term: leaderTerm, admittedAt: Date.now(), source: "discovery" }));
    const work = await receive(aws.sqsApi, standbyQueues.hostWork);
    const startup = encodeLifecycleEvent(
      buildLifecycleEvent({ type: "startup", identity: "n9.example.net", component: "provision_mode_server", timestampMs: Date.now() }),
      "cloudevents",
    );
    await send(aws.sqsApi, standbyQueues.lifecycle, new TextDecoder().decode(startup));
    const events = await receive(aws.sqsApi, standbyQueues.lifecycle);
    const standbyHandlers = handlers(standby);

    const discovered = await standbyHandlers.discover({}, lambdaContext());
    const provisioned = await standbyHandlers.provision(sqsEvent(work, standbyQueues.hostWork), lambdaContext());
    const lifecycle = await standbyHandlers.lifecycle(sqsEvent(events, standbyQueues.lifecycle), lambdaContext());

    expect(discovered).toEqual({ paused: true, discovered: 0, admitted: 0 });
    expect(provisioned.batchItemFailures).toEqual([]);
    expect(lifecycle.batchItemFailures).toEqual([]);
    expect(fleet.record.length).toBe(before);
    expect(await receive(aws.sqsApi, standbyQueues.hostWork)).toEqual([]);
    expect(standby.metrics.last(METRIC.paused)).toBe(1);
    expect(standby.metrics.total(EXTRA_METRIC.lifecycleEventsDropped)).toBe(1);
  });

  it("the lifecycle handler admits startup events of the configured component only", async () => {
    // The leader holds the lease (won by a discovery of an empty fleet, so nothing is queued).
    const { leader, leaderQueues } = await startSite([]);
    expect((await handlers(leader).discover({}, lambdaContext())).paused).toBe(false);
    const event = (type: "startup" | "shutdown", identity: string, component = "provision_mode_server", format: "choria" | "cloudevents" = "cloudevents") =>
      new TextDecoder().decode(encodeLifecycleEvent(buildLifecycleEvent({ type, identity, component, timestampMs: Date.now() }), format));
    await send(aws.sqsApi, leaderQueues.lifecycle, event("startup", "e1.example.net", "provision_mode_server", "choria"));
    await send(aws.sqsApi, leaderQueues.lifecycle, event("startup", "e2.example.net"));
    await send(aws.sqsApi, leaderQueues.lifecycle, event("startup", "e2.example.net"));
    await send(aws.sqsApi, leaderQueues.lifecycle, event("shutdown", "e3.example.net"));
    await send(aws.sqsApi, leaderQueues.lifecycle, event("startup", "e4.example.net", "server"));
    await send(aws.sqsApi, leaderQueues.lifecycle, "{\"protocol\":\"nonsense\"}");
    const messages = await receive(aws.sqsApi, leaderQueues.lifecycle);

    const response = await handlers(leader).lifecycle(sqsEvent(messages, leaderQueues.lifecycle), lambdaContext());

    const work = (await receive(aws.sqsApi, leaderQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    const dead = await receive(aws.sqsApi, leaderQueues.lifecycleDlq);
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

  it("reprovision refuses unknown and provisioned hosts as the CLI does, and admits them with force", async () => {
    // n1 provisioned by the leader; its work taken from the queue.
    const site = await startSite(["n1.example.net"]);
    const { fleet, leader, leaderQueues } = site;
    const { response } = await leaderProvisionsTheFleet(site);
    expect(response.batchItemFailures).toEqual([]);
    await fleet.waitFor(() => fleet.node("n1.example.net").restarts === 1);
    const identities = ["n1.example.net", "n9.example.net", "not valid"];

    const refused = await handlers(leader).reprovision({ identities }, lambdaContext());
    const nothing = await receive(aws.sqsApi, leaderQueues.hostWork);
    const forced = await handlers(leader).reprovision({ identities, force: true }, lambdaContext());
    const work = (await receive(aws.sqsApi, leaderQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));

    expect(refused).toEqual({
      term: expect.any(Number),
      admitted: [],
      refused: [
        { identity: "n1.example.net", reason: expect.stringMatching(/^already provisioned: .*then "force": true$/) },
        { identity: "n9.example.net", reason: expect.stringMatching(/^not known to the registry .*\("force": true\)$/) },
        { identity: "not valid", reason: expect.stringContaining("whitespace") },
      ],
    });
    expect(nothing).toEqual([]);
    expect(forced).toMatchObject({ admitted: ["n1.example.net", "n9.example.net"], refused: [{ identity: "not valid" }] });
    expect(work.map((entry) => [entry.identity, entry.source]).sort()).toEqual([
      ["n1.example.net", "operator"],
      ["n9.example.net", "operator"],
    ]);
  });

  it("release hands the lease over: the standby's keeper wins the next term, announces itself and discovers", async () => {
    const { fleet, time, leader, standby, standbyQueues, provisionerStartups } = await startSite(FLEET);
    expect((await handlers(leader).discover({}, lambdaContext())).paused).toBe(false);
    await fleet.waitFor(() => provisionerStartups.length === 1);
    const leaderTerm = (await leader.app.status()).lease.term as number;
    await fleet.addNodes(1);
    const fresh = fleet.identities.at(-1) as string;
    const startupsBefore = provisionerStartups.length;

    const released = await handlers(leader).release({}, lambdaContext());
    const tooEarly = await handlers(standby).keeper({}, lambdaContext(4_500));
    // The old term's expiry, the skew bound and the delivery horizon (the request TTL) pass.
    time.jump(30_000 + 5_000 + 30_000 + 1_000);
    const kept = await handlers(standby).keeper({}, lambdaContext(KEEPER_BUDGET_FOR_A_WON_TERM_MS));

    const status = (await handlers(standby).status({}, lambdaContext())) as StatusFunctionReport;
    const work = (await receive(aws.sqsApi, standbyQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    expect(released).toEqual({ released: true });
    // Too early, the standby's run armed one tick, for when the released term becomes claimable;
    // the run that won armed the holder's ticks of the minute ahead (one per renew_interval).
    expect(tooEarly).toEqual({ holding: false, armed: 1 });
    expect(kept).toEqual({ holding: true, wonTerm: leaderTerm + 1, armed: 60 / 10 });
    expect(status.lease).toEqual(expect.objectContaining({ leader: "standby", term: leaderTerm + 1, heldByThisDeployment: true }));
    expect(work).toContainEqual(expect.objectContaining({ identity: fresh, term: leaderTerm + 1 }));
    await fleet.waitFor(() => provisionerStartups.length === startupsBefore + 1);
  });

  it("discover near its deadline queues nothing and leaves the hosts to the next discovery", async () => {
    // The standby holds the lease (won by a discovery of an empty fleet, so nothing is queued).
    const { fleet, standby, standbyQueues } = await startSite([]);
    expect((await handlers(standby).discover({}, lambdaContext())).paused).toBe(false);
    await fleet.addNodes(2);
    const fresh = fleet.identities.slice(-2);

    const tooLate = await handlers(standby).discover({}, lambdaContext(2_500));
    const queuedTooLate = await receive(aws.sqsApi, standbyQueues.hostWork);
    const inTime = await handlers(standby).discover({}, lambdaContext());
    const queuedInTime = (await receive(aws.sqsApi, standbyQueues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));

    expect(tooLate).toMatchObject({ paused: false, admitted: 0 });
    expect(tooLate.discovered).toBeGreaterThanOrEqual(2);
    expect(queuedTooLate).toEqual([]);
    expect(inTime.admitted).toBeGreaterThanOrEqual(2);
    for (const identity of fresh) expect(queuedInTime).toContainEqual(expect.objectContaining({ identity }));
  });
});
