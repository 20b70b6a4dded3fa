/**
 * Forged discovery replies do not crowd out real nodes: a client on the provisioning broker that
 * answers every discovery before the nodes do, with made-up names, cannot take the budget of new
 * names (`discovery_new_names_per_interval`) for ever. Names are chosen at random, and those a
 * discovery left waiting go first the next time. Real NATS, DynamoDB Local, fauxqs and simulated nodes.
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { DynamoDbAdmissionStore } from "../../../lib/admission/dynamodb-admission-store";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { DiscoveryForger } from "../../support/discovery-forger";
import { receive, servicesForSuite } from "../../support/aws";
import { startDeployment, TOKEN } from "../../support/handlers";

const services = servicesForSuite();
const REAL = ["web1.example.net", "web2.example.net", "web3.example.net"];
const FORGED = 50;
const BUDGET = 10;
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

/**
 * Three real nodes in provisioning mode that answer discovery 100 ms after it is asked, well after
 * the forger and within the 300 ms of quiet that ends a discovery; a deployment with a budget of 10
 * new names a discovery, which runs `discoveries` discoveries. Returns the names queued, in order.
 */
async function discoverAmidForgery(fresh: boolean, discoveries: number) {
  const delayed = Object.fromEntries(REAL.map((identity) => [identity, { delay: { ms: 100, on: ["discovery#ping"] } }]));
  fleet = await startFleet({ natsUrl: services.nats.url, identities: REAL, token: TOKEN, restartDelayMs: 50, recordDiscovery: false, faults: delayed });
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
