/**
 * Discovery admission is bounded and a flood does not choose who is admitted: forged replies from
 * one hostile client on the provisioning broker admit at most `discovery_new_names_per_interval`
 * new names and `discovery_max_nodes` in all, hosts the registry knows go first, and what is left
 * out is logged and counted. New nodes amid forged names that arrive first are admitted all the
 * same: names are chosen at random, and those a discovery left waiting go first the next time.
 * Real NATS, DynamoDB Local, fauxqs and simulated nodes.
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { createApp } from "../../../dev/local/create-app";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { DiscoveryForger } from "../../support/discovery-forger";
import { realClock, RecordingLogger } from "../../support/fakes";
import { localAppSettings } from "../../support/app-settings";
import { lambdaContext, receive, sqsEvent, servicesForSuite } from "../../support/aws";
import { startDeployment, TOKEN, HELPER } from "../../support/handlers";

const services = servicesForSuite();
let forger: DiscoveryForger;
let fleet: Fleet | undefined;

beforeAll(async () => {
  forger = await DiscoveryForger.connect(services.nats.url);
});

afterEach(async () => {
  forger.stop();
  await fleet?.stop();
  fleet = undefined;
});

afterAll(async () => {
  await forger?.close();
});

describe("discovery under forged replies", () => {
  it("admits at most the cap from 2,005 forged replies, and logs and counts the names left out", async () => {
    // Arrange
    await forger.forge(2_005);
    const site = `cap-${randomUUID().slice(0, 8)}`;
    const resources = await services.resources(site);
    const yaml = [`site: ${site}`, "deployment_id: east", `helper: ${HELPER}`, "choria_insecure: true", "leader_election: true", "discovery_max_nodes: 50", `broker_urls: ["${services.nats.url}"]`].join("\n");
    const metrics = new InMemoryMetrics(site);
    const logger = new RecordingLogger();
    const app = await createApp(localAppSettings(yaml, resources), { metrics, logger });

    try {
      // Act
      const result = await app.discover({ remainingMs: () => 25_000 });

      // Assert
      expect(result).toMatchObject({ paused: false, discovered: 50, admitted: 50 });
      expect((await receive(services.sqsApi, resources.queues.hostWork, 3_000)).length).toBe(50);
      expect(metrics.total(EXTRA_METRIC.discoveryNamesDropped)).toBe(2_005 - 50);
      expect(logger.at("warn").find((warning) => warning.message.includes("discovery_max_nodes"))?.attributes).toMatchObject({ maxNodes: 50, droppedNew: 2_005 - 50 });
    } finally {
      await app.close();
    }
  });

  it("admits and provisions the three nodes the registry knows while a client answers with 12,004 forged names, and counts the forged ones left out", async () => {
    // Arrange: three real nodes an earlier leader admitted (term 0) whose work was lost, waiting in
    // provisioning mode; a client answering every discovery with 12,004 made-up names first.
    const real = ["web1.example.net", "web2.example.net", "web3.example.net"];
    fleet = await startFleet({ natsUrl: services.nats.url, identities: real, token: TOKEN, restartDelayMs: 50, recordDiscovery: false });
    await forger.forge(12_004);
    const site = `flood-${randomUUID().slice(0, 8)}`;
    const resources = await services.resources(site);
    const store = new DynamoDbAdmissionStore({ client: services.dynamo, tableName: resources.tables.admission });
    const now = Date.now();
    for (const identity of real) {
      const entry = { site, identity, term: 0, admittedAt: now - 60_000, source: "discovery" as const, state: "queued" as const, admissionId: randomUUID(), expiresAt: now + 3_600_000 };
      expect((await store.admit({ entry, blockIfAdmittedAfter: now - 60_000, now })).applied).toBe(true);
    }
    const deployment = await startDeployment({
      site,
      deploymentId: "east",
      natsUrl: services.nats.url,
      resources,
      // A window long enough that the whole flood is read on a loaded machine: it then ends 300 ms after the last reply.
      extraYaml: ["discovery_max_nodes: 100", "discovery_new_names_per_interval: 1", "discovery_timeout: 10s"].join("\n"),
    });

    try {
      // Act
      const result = await deployment.app.discover({ remainingMs: () => 25_000 });
      const messages = await receive(services.sqsApi, resources.queues.hostWork, 3_000);
      const works = messages.map((message) => decodeHostWork(message.Body ?? ""));
      // The forged name's work would only time out at the worker; the real nodes' work is provisioned.
      const realMessages = messages.filter((_message, index) => real.includes(works[index]!.identity));
      const response = await provisionHandler(async () => deployment.app)(sqsEvent(realMessages, resources.queues.hostWork), lambdaContext());

      // Assert: at the nodes and in the table.
      expect(result).toMatchObject({ paused: false, discovered: 4, admitted: 4 });
      const forgedAdmitted = works.map((work) => work.identity).filter((identity) => !real.includes(identity));
      expect(works.map((work) => work.identity).filter((identity) => real.includes(identity)).sort()).toEqual(real);
      // The one new name the budget lets in is drawn at random, not the first to arrive.
      expect(forgedAdmitted).toEqual([expect.stringMatching(/^forged-\d+\.example\.net$/)]);
      expect(response.batchItemFailures).toEqual([]);
      for (const identity of real) {
        expect(fleet.node(identity).provisioned).toBe(1);
        expect((await store.read({ site, identity }))?.state).toBe("provisioned");
      }
      expect(deployment.metrics.total(EXTRA_METRIC.discoveryNamesDropped)).toBe(12_004 - 1);
    } finally {
      await deployment.app.close();
    }
  });
});

describe("discovery under forged replies across a failover", () => {
  it("admits at the new leader's first discovery the real nodes the old leader's discovery left waiting", async () => {
    // Arrange: east and west share the site's tables; a forger answers every discovery first with 50 fresh names.
    const time = realClock();
    fleet = await startFleet({ natsUrl: services.nats.url, identities: REAL, token: TOKEN, restartDelayMs: 50, recordDiscovery: false, faults: answerLate(), clock: time });
    await forger.forge(FORGED, { fresh: true });
    const site = `forged-${randomUUID().slice(0, 8)}`;
    const eastResources = await services.resources(`${site}-east`);
    const westResources = await services.resources(`${site}-west`, eastResources.tables);
    const extraYaml = [`discovery_new_names_per_interval: ${BUDGET}`, "discovery_backlog: 0s"].join("\n");
    const east = await startDeployment({ site, deploymentId: "east", natsUrl: services.nats.url, resources: eastResources, extraYaml, clock: time });
    const west = await startDeployment({ site, deploymentId: "west", natsUrl: services.nats.url, resources: westResources, extraYaml, clock: time });

    // Act: east discovers once and hands over; west takes the next term and discovers once.
    let eastDiscovery, westDiscovery;
    try {
      eastDiscovery = await east.app.discover({ remainingMs: () => 25_000 });
      expect(await east.app.release()).toEqual({ released: true });
      // The released term's expiry, the skew bound and the delivery horizon (the request TTL) pass.
      time.jump(30_000 + 5_000 + 30_000 + 1_000);
      westDiscovery = await west.app.discover({ remainingMs: () => 25_000 });
    } finally {
      await east.app.close();
      await west.app.close();
    }

    // Assert: at both deployments' queues and in the site's registry.
    const queuedBy = async (queue: string) => (await receive(services.sqsApi, queue, 200)).map((message) => decodeHostWork(message.Body ?? ""));
    const eastQueued = await queuedBy(eastResources.queues.hostWork);
    const westQueued = await queuedBy(westResources.queues.hostWork);
    const store = new DynamoDbAdmissionStore({ client: services.dynamo, tableName: eastResources.tables.admission });
    expect(eastDiscovery).toMatchObject({ paused: false, admitted: BUDGET });
    expect(westDiscovery).toMatchObject({ paused: false, term: eastDiscovery.term! + 1 });
    expect(eastQueued.map((work) => work.term)).toEqual(Array(BUDGET).fill(eastDiscovery.term));
    // East's queued work is of an old term: west queues the real nodes east admitted again, under its
    // own term, and those east left waiting go first among west's new names.
    const westTerm = westQueued.filter((work) => work.term === westDiscovery.term).map((work) => work.identity);
    expect(REAL.filter((identity) => westTerm.includes(identity))).toEqual(REAL);
    for (const identity of REAL) expect((await store.read({ site, identity }))?.state).toBe("queued");
  });
});

const REAL = ["web1.example.net", "web2.example.net", "web3.example.net"];
const FORGED = 50;
const BUDGET = 10;

/** The real nodes answer discovery 100 ms after it is asked: well after the forger, within the 300 ms of quiet that ends a discovery. */
const answerLate = () => Object.fromEntries(REAL.map((identity) => [identity, { delay: { ms: 100, on: ["discovery#ping"] } }]));

/**
 * Three real nodes in provisioning mode that answer discovery 100 ms after it is asked, well after
 * the forger and within the 300 ms of quiet that ends a discovery; a deployment with a budget of 10
 * new names a discovery, which runs `discoveries` discoveries. Returns the names queued, in order.
 */
async function discoverAmidForgery(fresh: boolean, discoveries: number) {
  fleet = await startFleet({ natsUrl: services.nats.url, identities: REAL, token: TOKEN, restartDelayMs: 50, recordDiscovery: false, faults: answerLate() });
  await forger.forge(FORGED, { fresh });
  const site = `forged-${randomUUID().slice(0, 8)}`;
  const resources = await services.resources(site);
  const deployment = await startDeployment({
    site,
    deploymentId: "east",
    natsUrl: services.nats.url,
    resources,
    // Unpaced: nothing works the queue off here, and the later discoveries name more than the 50 a paced one lets wait.
    extraYaml: ["discovery_max_nodes: 100", `discovery_new_names_per_interval: ${BUDGET}`, "discovery_backlog: 0s"].join("\n"),
  });
  const results = [];
  try {
    for (let round = 0; round < discoveries; round++) results.push(await deployment.app.discover({ remainingMs: () => 25_000 }));
  } finally {
    await deployment.app.close();
  }
  const queued = (await receive(services.sqsApi, resources.queues.hostWork, 200)).map((message) => decodeHostWork(message.Body ?? "").identity);
  const store = new DynamoDbAdmissionStore({ client: services.dynamo, tableName: resources.tables.admission });
  const states = await Promise.all(REAL.map(async (identity) => (await store.read({ site, identity }))?.state));
  return { results, queued, states };
}

describe("discovery under forged replies that arrive first", () => {
  it("admits all three real nodes within two discoveries while a client answers each one first with 50 fresh made-up names", async () => {
    // Act
    const { results, queued, states } = await discoverAmidForgery(true, 2);

    // Assert: at the queue and in the registry.
    expect(results.map((result) => result.admitted)).toEqual([BUDGET, BUDGET]);
    expect(REAL.filter((identity) => queued.includes(identity))).toEqual(REAL);
    expect(states).toEqual(["queued", "queued", "queued"]);
  });

  it("admits all three real nodes within ceil(53 / 10) discoveries while a client answers each one first with the same 50 made-up names", async () => {
    // Act
    const { results, queued, states } = await discoverAmidForgery(false, Math.ceil((FORGED + REAL.length) / BUDGET));

    // Assert
    expect(results.map((result) => result.admitted)).toEqual([BUDGET, BUDGET, BUDGET, BUDGET, BUDGET, 3]);
    expect(new Set(queued).size).toBe(FORGED + REAL.length);
    expect(REAL.filter((identity) => queued.includes(identity))).toEqual(REAL);
    expect(states).toEqual(["queued", "queued", "queued"]);
  });
});
