import { randomUUID } from "node:crypto";
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LeaseLostError, LeaseStoreError, PausedError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import { createLeaseTable, DynamoDbLeaseStore } from "../../../lib/lease/dynamodb-lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports";
import { LOCAL_AWS, freePort } from "../../../dev/local/services";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";

const TABLE = `lease-it-${randomUUID()}`;

describe("lease on DynamoDB Local", () => {
  let client: DynamoDBClient;
  let store: DynamoDbLeaseStore;

  beforeAll(async () => {
    client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
    await createLeaseTable(client, TABLE);
    store = new DynamoDbLeaseStore({ client, tableName: TABLE });
  });
  afterAll(() => client?.destroy());

  function deployment(site: string, deploymentId: string, time: VirtualClock, offsetMs = 0, leaseStore = store) {
    const metrics = new RecordingMetrics();
    const logger = new RecordingLogger();
    const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId });
    const gate = createLeaseGate(settings, { store: leaseStore, metrics, logger, clock: time.skewed(offsetMs) });
    return { gate, metrics, logger };
  }

  async function storedItem(site: string) {
    const { Item } = await client.send(new GetItemCommand({ TableName: TABLE, Key: { site: { S: site } }, ConsistentRead: true }));
    return { holder: Item?.holder?.S, term: Number(Item?.term?.N), expiresAt: Number(Item?.expiresAt?.N) };
  }

  it("acquires an absent lease with term 1 and reports the new term", async () => {
    const site = `acquire-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = deployment(site, "prod-eu", time);

    const outcome = await leader.gate.acquireOrRenew();

    expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: true });
    expect(await storedItem(site)).toEqual({ holder: "prod-eu", term: 1, expiresAt: time.trueTime + 30_000 });
    expect(leader.metrics.lastGauge(METRIC.paused)).toBe(0);
    await expect(leader.gate.assertOpen(1, 5_000)).resolves.toMatchObject({ term: expect.any(Number) });
  });

  it("renews its own lease under the same term and pushes the expiry out", async () => {
    const site = `renew-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = deployment(site, "prod-eu", time);
    await leader.gate.acquireOrRenew();
    time.advance(10_000);

    const outcome = await leader.gate.acquireOrRenew();

    expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: false });
    expect((await storedItem(site)).expiresAt).toBe(time.trueTime + 30_000);
  });

  it("keeps a standby paused while the leader's lease is live", async () => {
    const site = `standby-${randomUUID()}`;
    const time = new VirtualClock();
    await deployment(site, "prod-eu", time).gate.acquireOrRenew();
    const standby = deployment(site, "prod-us", time);

    const outcome = await standby.gate.acquireOrRenew();

    expect(outcome).toMatchObject({ holding: false, current: { holder: "prod-eu", term: 1 } });
    await expect(standby.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
    expect(standby.metrics.lastGauge(METRIC.paused)).toBe(1);
    expect(await standby.gate.currentTerm()).toBeUndefined();
  });

  it("takes over an expired lease only after expiry plus the skew bound, bumping the term", async () => {
    const site = `takeover-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = deployment(site, "prod-eu", time);
    const challenger = deployment(site, "prod-us", time);
    await leader.gate.acquireOrRenew();

    time.advance(30_000 + 5_000);
    const early = await challenger.gate.acquireOrRenew();
    time.advance(1);
    const late = await challenger.gate.acquireOrRenew();

    expect(early.holding).toBe(false);
    expect(late).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
    await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
    expect(await leader.gate.acquireOrRenew()).toMatchObject({ holding: false, current: { holder: "prod-us", term: 2 } });
  });

  it("releases on a graceful stop: the leader closes at once, nobody renews, the standby takes the next term once the old expiry has passed", async () => {
    const site = `release-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = deployment(site, "prod-eu", time);
    const standby = deployment(site, "prod-us", time);
    await leader.gate.acquireOrRenew();

    const released = await leader.gate.release();
    const early = await standby.gate.acquireOrRenew();
    time.advance(35_001);
    const outcome = await standby.gate.acquireOrRenew();

    expect(released).toBe(true);
    await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
    expect(early.holding).toBe(false);
    expect(outcome).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
  });

  it.each([2, 3, 5])("lets exactly one of %i contending deployments win", async (contenders) => {
    const site = `contention-${contenders}-${randomUUID()}`;
    const time = new VirtualClock();
    const deployments = Array.from({ length: contenders }, (_, index) => deployment(site, `deployment-${index}`, time, index * 700));

    const outcomes = await Promise.all(deployments.map(({ gate }) => gate.acquireOrRenew()));

    const winners = outcomes.filter((outcome) => outcome.holding);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toMatchObject({ term: 1, wonNewTerm: true });
    const winnerId = deployments[outcomes.indexOf(winners[0]!)];
    expect((await storedItem(site)).holder).toBe(`deployment-${deployments.indexOf(winnerId!)}`);
  });

  it("lets every concurrent invocation of the leading deployment renew", async () => {
    const site = `invocations-${randomUUID()}`;
    const time = new VirtualClock();
    await deployment(site, "prod-eu", time).gate.acquireOrRenew();
    const invocations = Array.from({ length: 4 }, (_, index) => deployment(site, "prod-eu", time, index * 300));
    time.advance(10_000);

    const outcomes = await Promise.all(invocations.map(({ gate }) => gate.acquireOrRenew()));
    const gates = await Promise.allSettled(invocations.map(({ gate }) => gate.assertOpen(1, 5_000)));

    expect(outcomes.every((outcome) => outcome.holding && outcome.term === 1)).toBe(true);
    expect(gates.map((gate) => gate.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
  });

  it("rejects work admitted under an older term once the deployment holds a newer one", async () => {
    const site = `stale-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = deployment(site, "prod-eu", time);
    const other = deployment(site, "prod-us", time);
    await leader.gate.acquireOrRenew();
    await leader.gate.release();
    time.advance(35_001);
    await other.gate.acquireOrRenew();
    await other.gate.release();
    time.advance(35_001);

    const outcome = await leader.gate.acquireOrRenew();

    expect(outcome).toMatchObject({ holding: true, term: 3, wonNewTerm: true });
    await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(leader.gate.assertOpen(3, 1_000)).resolves.toMatchObject({ term: expect.any(Number) });
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

    const outcome = await leader.gate.acquireOrRenew().finally(() => (dropResponses = false));

    // The term's announcement marker lost its response too: counted as not won (announced at most once).
    expect(outcome).toMatchObject({ holding: true, term: 1, tookOver: true });
    await expect(leader.gate.assertOpen(1, 5_000)).resolves.toMatchObject({ term: expect.any(Number) });
  });

  it("settles a renewal whose response was lost as renewed", async () => {
    const site = `lost-renewal-${randomUUID()}`;
    const time = new VirtualClock();
    const leader = gateOn(site, "prod-eu", time, lossyClient);
    await leader.gate.acquireOrRenew();
    time.advance(20_000);
    dropResponses = true;

    const outcome = await leader.gate.acquireOrRenew().finally(() => (dropResponses = false));

    expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: false });
    expect(outcome.holding && outcome.validForMs).toBe(25_000);
  });

  it("settles a write that never reached the table as not won, leaving the gate closed", async () => {
    const site = `never-sent-${randomUUID()}`;
    const time = new VirtualClock();
    const standby = gateOn(site, "prod-us", time, lossyClient);
    await gateOn(site, "prod-eu", time, client).gate.acquireOrRenew();
    time.advance(40_000);
    failBeforeSending = true;

    const outcome = await standby.gate.acquireOrRenew().finally(() => (failBeforeSending = false));

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
