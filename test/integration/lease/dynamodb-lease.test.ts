import { randomUUID } from "node:crypto";
import { DynamoDBClient, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LeaseStoreError, PausedError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import { createLeaseTable } from "../../../dev/local/resources";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { LOCAL_AWS, freePort } from "../../../dev/local/services";
import { describeLeaseStoreRules } from "../../support/contracts/lease-store-rules";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";

const TABLE = `lease-it-${randomUUID()}`;

describe("lease on DynamoDB Local", () => {
  let client: DynamoDBClient;

  beforeAll(async () => {
    client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
    await createLeaseTable(client, TABLE);
  });
  afterAll(() => client?.destroy());

  describeLeaseStoreRules("DynamoDB Local", () => new DynamoDbLeaseStore({ client, tableName: TABLE }));

  it("keeps the lease as one item per site: holder, term and expiry as attributes, a peer as peers.<id>", async () => {
    const site = `attributes-${randomUUID()}`;
    const time = new VirtualClock();
    const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId: "prod-eu" });
    const gate = createLeaseGate(settings, { store: new DynamoDbLeaseStore({ client, tableName: TABLE }), metrics: new RecordingMetrics(), clock: time.skewed() });

    await gate.acquireOrKeep();

    const { Item } = await client.send(new GetItemCommand({ TableName: TABLE, Key: { site: { S: site } }, ConsistentRead: true }));
    expect(Item).toMatchObject({
      site: { S: site },
      holder: { S: "prod-eu" },
      term: { N: "1" },
      expiresAt: { N: String(time.trueTime + 30_000) },
      "peers.prod-eu": { N: expect.any(String) },
    });
  });

  it("reads a delivery horizon that is absent or not a number (older code, a hand edit) as none: keeps raise it and a claim does not wait for it", async () => {
    const store = new DynamoDbLeaseStore({ client, tableName: TABLE });
    const [absent, text, claimed] = ["absent", "text", "claimed"].map((label) => `horizon-${label}-${randomUUID()}`) as [string, string, string];
    const lease = (site: string) => ({ site: { S: site }, holder: { S: "prod-eu" }, term: { N: "1" }, expiresAt: { N: "30000" } });
    await client.send(new PutItemCommand({ TableName: TABLE, Item: lease(absent) }));
    await client.send(new PutItemCommand({ TableName: TABLE, Item: { ...lease(text), deliveryHorizonMs: { S: "120 s" } } }));
    await client.send(new PutItemCommand({ TableName: TABLE, Item: { ...lease(claimed), deliveryHorizonMs: { S: "120 s" } } }));
    const bounds = { skewBoundMs: 5_000, seenAt: 1 };

    const kept = await store.extend({ site: absent, holder: "prod-eu", term: 1, expiresAt: 40_000, deliveryHorizonMs: 30_000, ...bounds });
    const raisedOnly = await store.extend({ site: text, holder: "prod-eu", term: 1, expiresAt: 29_000, deliveryHorizonMs: 60_000, ...bounds });
    const taken = await store.claim({ site: claimed, holder: "prod-us", expiresAt: 90_000, expiredBefore: 60_000, waitedHorizonMs: 0, deliveryHorizonMs: 30_000, ...bounds });

    expect(kept).toMatchObject({ applied: true, item: { expiresAt: 40_000, deliveryHorizonMs: 30_000 } });
    expect(raisedOnly).toMatchObject({ applied: true, item: { expiresAt: 30_000, deliveryHorizonMs: 59_000 } });
    expect(taken).toMatchObject({ applied: true, item: { holder: "prod-us", term: 2, deliveryHorizonMs: 30_000 } });
  });
});

describe("ambiguous lease writes on DynamoDB Local", () => {
  let client: DynamoDBClient;
  let lossyClient: DynamoDBClient;
  let dropResponses = false;
  let failBeforeSending = false;

  beforeAll(async () => {
    client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
    await createLeaseTable(client, `${TABLE}-ambiguous`);
    // A client whose writes reach the real table but whose responses can be lost, or which fails
    // before sending: the two outcomes a timeout cannot tell apart.
    lossyClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint"), maxAttempts: 1 });
    lossyClient.middlewareStack.add(
      (next, context) => async (args) => {
        const write = context.commandName === "UpdateItemCommand";
        if (write && failBeforeSending) throw Object.assign(new Error("socket timed out before sending"), { name: "TimeoutError" });
        const result = await next(args);
        if (write && dropResponses) throw Object.assign(new Error("response lost"), { name: "TimeoutError" });
        return result;
      },
      { step: "finalizeRequest", name: "lossyNetwork" },
    );
  });
  afterAll(() => {
    client?.destroy();
    lossyClient?.destroy();
  });

  function gateOn(site: string, deploymentId: string, time: VirtualClock, leaseClient: DynamoDBClient) {
    const metrics = new RecordingMetrics();
    const store = new DynamoDbLeaseStore({ client: leaseClient, tableName: `${TABLE}-ambiguous` });
    const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId });
    return { gate: createLeaseGate(settings, { store, metrics, clock: time.skewed() }), metrics };
  }

  it("settles a claim whose response was lost as won, by a consistent read", async () => {
    const site = `lost-response-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = gateOn(site, "prod-eu", time, lossyClient);
    dropResponses = true;

    const outcome = await leader.gate.acquireOrKeep().finally(() => (dropResponses = false));

    // The term's announcement marker lost its response too: counted as not won (announced at most once).
    expect(outcome).toMatchObject({ holding: true, term: 1, tookOver: true });
    await expect(leader.gate.assertOpen(1, 5_000)).resolves.toMatchObject({ term: expect.any(Number) });
  });

  it("settles a keep whose response was lost as kept", async () => {
    const site = `lost-keep-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = gateOn(site, "prod-eu", time, lossyClient);
    await leader.gate.acquireOrKeep();
    time.advance(20_000);
    dropResponses = true;

    const outcome = await leader.gate.acquireOrKeep().finally(() => (dropResponses = false));

    expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: false });
    expect(outcome.holding && outcome.validForMs).toBe(25_000);
  });

  it("settles a write that never reached the table as not won, leaving the gate closed", async () => {
    const site = `never-sent-${randomUUID()}`;
    const time = new VirtualClock();
    const standby = gateOn(site, "prod-us", time, lossyClient);
    await gateOn(site, "prod-eu", time, client).gate.acquireOrKeep();
    time.advance(40_000);
    failBeforeSending = true;

    const outcome = await standby.gate.acquireOrKeep().finally(() => (failBeforeSending = false));

    expect(outcome).toMatchObject({ holding: false, current: { holder: "prod-eu", term: 1 } });
    await expect(standby.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
  });
});

describe("lease store unreachable", () => {
  it("closes the gate, logs and counts the failure", async () => {
    const closedPort = await freePort();
    const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: `http://127.0.0.1:${closedPort}`, maxAttempts: 1 });
    const metrics = new RecordingMetrics();
    const logger = new RecordingLogger();
    const store = new DynamoDbLeaseStore({ client, tableName: TABLE });
    const settings = resolveLeaseSettings({ leaderElection: true, site: "down", deploymentId: "prod-eu" });
    const gate = createLeaseGate(settings, { store, metrics, logger, clock: new VirtualClock().skewed() });

    const error = await gate.assertOpen(1, 1_000).catch((caught: unknown) => caught);

    client.destroy();
    expect(error).toBeInstanceOf(PausedError);
    expect((error as PausedError).cause).toBeInstanceOf(LeaseStoreError);
    expect(metrics.total(EXTRA_METRIC.leaseStoreErrors)).toBe(1);
    expect(metrics.lastGauge(METRIC.paused)).toBe(1);
    expect(logger.records.some((record) => record.level === "error" && record.message.includes("lease store failed"))).toBe(true);
    expect(await gate.currentTerm()).toBeUndefined();
  });
});
