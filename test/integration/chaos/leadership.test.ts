/**
 * Leadership faults with two deployments contending for one site over DynamoDB Local and provisioning
 * a simulated fleet over a real nats-server: both started at once, the leader killed in the middle of
 * provisioning, the leader's lease writes held back past its lease, wall clocks skewed up to and
 * beyond the bound, a graceful release. Asserted from the RPC record: no deployment sends after
 * another deployment's newer term began (within the skew bound), every successful configure belongs
 * to one admission, and no host is lost.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { connect, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { createLeaseTable, DynamoDbLeaseStore } from "../../../lib/lease/dynamodb-lease-store";
import { LOCAL_AWS, startNats, type RunningNats } from "../../../lib/local/services";
import { startFleet, type Fleet } from "../../../lib/simulator";
import { ChaosDeployment, LEASE, Observatory, SCALE, unprovisioned } from "./deployments";
import { recordScenario } from "./scenario";
import { TOKEN } from "./support";

const NODES = 24;
/** Real-time bound on one scenario converging; a lease takeover is ~4 s of real time at SCALE. */
const CONVERGE_MS = 30_000;

let nats: RunningNats;
let dynamo: DynamoDBClient;
let store: DynamoDbLeaseStore;
const connections: NatsConnection[] = [];
const running: Array<{ fleet: Fleet; deployments: ChaosDeployment[] }> = [];

beforeAll(async () => {
  nats = await startNats();
  dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  const tableName = `chaos-lease-${randomUUID()}`;
  await createLeaseTable(dynamo, tableName);
  store = new DynamoDbLeaseStore({ client: dynamo, tableName });
});

afterEach(async () => {
  for (const { fleet, deployments } of running.splice(0)) {
    deployments.forEach((deployment) => deployment.kill());
    await Promise.all(deployments.map((deployment) => deployment.shutdown()));
    await fleet.stop();
  }
  await Promise.all(connections.splice(0).map((nc) => nc.close()));
});

afterAll(async () => {
  dynamo?.destroy();
  await nats?.stop();
});

interface Scenario {
  fleet: Fleet;
  observatory: Observatory;
  deployments: ChaosDeployment[];
}

/** A fresh site and fleet, and one deployment (own NATS connection) per entry of `skews`. */
async function scenario(names: string[], skews: Record<string, number> = {}): Promise<Scenario> {
  const site = `chaos-${randomUUID()}`;
  const fleet = await startFleet({ natsUrl: nats.url, count: NODES, identityPrefix: "lead", token: TOKEN, restartDelayMs: 20, recordDiscovery: false });
  const observatory = new Observatory();
  const deployments = await Promise.all(
    names.map(async (name) => {
      const nc = await connect({ servers: nats.url, name });
      connections.push(nc);
      return new ChaosDeployment({ name, site, store, nc, fleet, observatory, skewMs: skews[name] ?? 0 });
    }),
  );
  running.push({ fleet, deployments });
  return { fleet, observatory, deployments };
}

function waitFor(condition: () => boolean, what: string, timeoutMs = CONVERGE_MS): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const poll = () => {
      if (condition()) resolve();
      else if (performance.now() > deadline) reject(new Error(`${what} not reached within ${timeoutMs} ms`));
      else setTimeout(poll, 20);
    };
    poll();
  });
}

const configured = (fleet: Fleet) => fleet.record.filter((entry) => entry.action === "configure" && entry.outcome === 0).length;

function assertSafe(run: Scenario): { duplicates: number; lost: number } {
  const duplicates = run.observatory.duplicateSends();
  expect(duplicates, JSON.stringify(duplicates.slice(0, 5))).toEqual([]);
  for (const [admission, count] of run.observatory.configuresPerAdmission(run.fleet)) expect(count, admission).toBe(1);
  const lost = unprovisioned(run.fleet);
  expect(lost).toEqual([]);
  return { duplicates: duplicates.length, lost: lost.length };
}

describe("leadership faults", () => {
  it("two deployments started at once: one term, one sender, every node configured once", async ({ task }) => {
    // Arrange
    const run = await scenario(["east", "west"]);

    // Act
    run.deployments.forEach((deployment) => deployment.start());
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned");

    // Assert
    const senders = new Set(run.observatory.sends.map((send) => send.deployment));
    expect(senders.size).toBe(1);
    expect(run.observatory.terms.map((term) => term.term)).toEqual([1]);
    const { duplicates, lost } = assertSafe(run);
    expect(configured(run.fleet)).toBe(NODES);
    recordScenario(task, { area: "leadership", load: NODES, faults: 1, duplicateSends: duplicates, hostsLost: lost });
  });

  it("leader killed mid-sequence: the standby takes over after expiry and finishes; nothing sent by the dead leader after", async ({ task }) => {
    // Arrange
    const run = await scenario(["east", "west"]);
    const [east, west] = run.deployments as [ChaosDeployment, ChaosDeployment];
    east.start();
    await waitFor(() => configured(run.fleet) >= NODES / 4, "a quarter of the fleet configured");

    // Act
    east.kill();
    west.start();
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned after the takeover");

    // Assert
    expect(run.observatory.terms.map((term) => [term.deployment, term.term])).toEqual([["east", 1], ["west", 2]]);
    expect(run.observatory.sends.some((send) => send.deployment === "west")).toBe(true);
    const { duplicates, lost } = assertSafe(run);
    recordScenario(task, { area: "leadership", load: NODES, faults: 1, duplicateSends: duplicates, hostsLost: lost });
  });

  it("leader's store writes delayed past its lease: it pauses by its own deadline and the standby's term never overlaps its sends", async ({ task }) => {
    // Arrange
    const run = await scenario(["east", "west"]);
    const [east, west] = run.deployments as [ChaosDeployment, ChaosDeployment];
    east.start();
    await waitFor(() => configured(run.fleet) >= NODES / 4, "a quarter of the fleet configured");

    // Act
    east.delayStoreWrites((LEASE.leaseDurationMs * 2) / SCALE);
    west.start();
    await waitFor(() => run.observatory.terms.some((term) => term.deployment === "west"), "the standby winning a term");
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned");

    // Assert
    const { duplicates, lost } = assertSafe(run);
    recordScenario(task, { area: "leadership", load: NODES, faults: 1, duplicateSends: duplicates, hostsLost: lost });
  });

  it("clocks skewed by the full bound (leader slow, standby fast) through a leader kill: still no overlap", async ({ task }) => {
    // Arrange
    const half = LEASE.skewBoundMs / 2;
    const run = await scenario(["slow", "fast"], { slow: -half, fast: +half });
    const [slow, fast] = run.deployments as [ChaosDeployment, ChaosDeployment];
    slow.start();
    await waitFor(() => configured(run.fleet) >= NODES / 4, "a quarter of the fleet configured");

    // Act
    fast.start();
    await waitFor(() => configured(run.fleet) >= NODES / 2, "half of the fleet configured");
    slow.kill();
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned");

    // Assert
    expect(run.observatory.terms.map((term) => term.deployment)).toEqual(["slow", "fast"]);
    const { duplicates, lost } = assertSafe(run);
    recordScenario(task, { area: "leadership", load: NODES, faults: 2, duplicateSends: duplicates, hostsLost: lost });
  });

  it("clocks skewed far beyond the bound: the standby usurps a live leader, yet every configure still belongs to one admission", async ({ task }) => {
    // Arrange
    const beyond = LEASE.leaseDurationMs + 2 * LEASE.skewBoundMs;
    const run = await scenario(["honest", "ahead"], { ahead: beyond });
    const [honest, ahead] = run.deployments as [ChaosDeployment, ChaosDeployment];
    honest.start();
    await waitFor(() => run.observatory.sends.length > 0, "the leader sending");

    // Act
    ahead.start();
    await waitFor(() => run.observatory.terms.some((term) => term.deployment === "ahead"), "the skewed standby winning a term");
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned");

    // Assert
    expect(run.observatory.terms.filter((term) => term.deployment === "ahead").length).toBeGreaterThan(0);
    for (const [admission, count] of run.observatory.configuresPerAdmission(run.fleet)) expect(count, admission).toBe(1);
    expect(unprovisioned(run.fleet)).toEqual([]);
    // Outside the bound the lease promises nothing: overlapping sends are possible and only reported.
    recordScenario(task, { area: "leadership", load: NODES, faults: 1, duplicateSends: run.observatory.duplicateSends().length, hostsLost: 0, beyondBound: true });
  });

  it("graceful release: the standby takes over without waiting for the lease to expire", async ({ task }) => {
    // Arrange
    const run = await scenario(["east", "west"]);
    const [east, west] = run.deployments as [ChaosDeployment, ChaosDeployment];
    east.start();
    west.start();
    await waitFor(() => configured(run.fleet) >= NODES / 4, "a quarter of the fleet configured");
    const leader = run.observatory.terms[0]?.deployment === "east" ? east : west;
    const standbyName = leader === east ? "west" : "east";

    // Act
    const released = await leader.stopAndRelease();
    await waitFor(() => run.observatory.terms.some((term) => term.deployment === standbyName), "the standby winning a term");
    await waitFor(() => unprovisioned(run.fleet).length === 0, "every node provisioned");

    // Assert
    expect(released).toBe(true);
    const lastRenewal = Math.max(...run.observatory.renewals.filter((renewal) => renewal.deployment === leader.name).map((renewal) => renewal.expiresAt));
    const takeover = run.observatory.terms.find((term) => term.deployment === standbyName)!;
    expect(takeover.wallAt).toBeLessThan(lastRenewal + LEASE.skewBoundMs);
    const { duplicates, lost } = assertSafe(run);
    recordScenario(task, { area: "leadership", load: NODES, faults: 1, duplicateSends: duplicates, hostsLost: lost });
  });
});
