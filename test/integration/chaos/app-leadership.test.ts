/**
 * Leadership faults through the real App: two deployments (createApp, each with its own queues,
 * sharing the lease and admission tables as global tables would) started at once, the leader
 * killed in the middle of its host work, the standby's lease keeper taking over, and the dead
 * leader's queued work handed to the new leader. The Apps run on clocks SCALE times faster than
 * real time, so the 30 s lease expires in seconds; every RPC attempt is tagged from the engine's
 * per-attempt log line (identity, term) with the deployment that logged it.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp, type App } from "../../../dev/local/create-app";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import type { LogAttributes, Logger } from "../../../lib/ports/logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import type { KeepLeaseResult } from "../../../lib/app/leadership";
import { createTables, deliverOnce, remainingTime, servicesForSuite, type Queues } from "../../support/aws";
import { localAppSettings } from "../../support/app-settings";
import { KEEPER_RATE_MS, LEASE, SCALE, scaledClock } from "../../support/chaos/deployments";
import { recordScenario } from "../../support/chaos/scenario";
import { CountingHelper, TOKEN } from "../../support/chaos/support";

const NODES = 16;

const services = servicesForSuite();
let fleet: Fleet;
const apps: App[] = [];

beforeAll(async () => {
  // The nodes share the Apps' time: they judge each request's TTL by it.
  fleet = await startFleet({ natsUrl: services.nats.url, count: NODES, identityPrefix: "app-lead", token: TOKEN, restartDelayMs: 20, recordDiscovery: false, clock: scaledClock() });
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await fleet?.stop();
});

interface Attempt {
  deployment: string;
  identity: string;
  term: number;
  rpc: string;
  at: number;
}

/** What every deployment logged that the assertions need, stamped with real time. */
class Journal {
  readonly attempts: Attempt[] = [];
  readonly wonTerms: Array<{ deployment: string; term: number; at: number }> = [];

  logger(deployment: string): Logger {
    const record = (message: string, attributes?: LogAttributes) => {
      const at = performance.now();
      if (message.startsWith("Trying action ") && typeof attributes?.term === "number") {
        this.attempts.push({ deployment, identity: String(attributes.identity), term: attributes.term, rpc: String(attributes.rpc), at });
      }
      if (message === "won a new lease term" && typeof attributes?.term === "number") this.wonTerms.push({ deployment, term: attributes.term, at });
    };
    return { debug: record, info: record, warn: record, error: record };
  }
}

async function deployment(name: string, site: string, tables: { lease: string; admission: string }, journal: Journal): Promise<{ app: App; queues: Queues }> {
  const resources = await services.resources(`${site}-${name}`, tables);
  const yaml = [
    `site: ${site}`,
    `deployment_id: ${name}`,
    "helper: /bin/false",
    "choria_insecure: true",
    "leader_election: true",
    "workers: 8",
    `token: ${TOKEN}`,
    "features: { jwt: true }",
    `jwt_verify_cert: "${fleet.signer.alg === "EdDSA" ? fleet.signer.publicKeyHex : ""}"`,
    `broker_urls: ["${services.nats.url}"]`,
  ].join("\n");
  const settings = localAppSettings(yaml, resources, { serviceName: name, metricsNamespace: "Chaos" });

  const helper = new CountingHelper();
  const app = await createApp(settings, { metrics: new InMemoryMetrics(site), logger: journal.logger(name), helper, clock: scaledClock() });
  apps.push(app);
  return { app, queues: resources.queues };
}

async function deliver(app: App, queueUrl: string, max = 10, invocationMs = 600_000): Promise<number> {
  const { received } = await deliverOnce(services.sqsApi, queueUrl, (event) => app.handleHostWorkBatch(event, { remainingMs: remainingTime(invocationMs) }), max);
  return received;
}

/** The keeper's runs, one per keeper period of the Apps' clock, until one holds the lease (at most five). */
async function keeperRunsUntilHolding(app: App): Promise<KeepLeaseResult[]> {
  const runs: KeepLeaseResult[] = [];
  for (let run = 0; run < 5; run++) {
    if (run > 0) await new Promise((resolve) => setTimeout(resolve, KEEPER_RATE_MS / SCALE));
    runs.push(await app.keepLease({ remainingMs: remainingTime(30_000) }));
    if (runs.at(-1)!.holding) break;
  }
  return runs;
}

const configures = (identity: string) => fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure" && entry.outcome === 0).length;
const unprovisioned = () => fleet.identities.filter((identity) => configures(identity) === 0);

describe("leadership faults through the App", () => {
  it("started at once, leader killed mid-work, standby's keeper takes over: no attempt by the dead leader after the new term, stale work discarded, every node configured once", async ({ task }) => {
    // Arrange
    const site = `app-chaos-${randomUUID().slice(0, 8)}`;
    const tables = await createTables(services.dynamo, site);
    const journal = new Journal();
    const [east, west] = await Promise.all([deployment("east", site, tables, journal), deployment("west", site, tables, journal)]);

    // Act: both discover at once; the leader works one batch, then dies.
    const [eastDiscovery, westDiscovery] = await Promise.all([east.app.discover({ remainingMs: remainingTime(60_000) }), west.app.discover({ remainingMs: remainingTime(60_000) })]);
    const [leader, standby] = eastDiscovery.paused ? [west, east] : [east, west];
    const leaderName = leader === east ? "east" : "west";
    // With under two minutes left the invocation takes no more work from the queue than its batch
    // (the provision function's refill stops there), so the dead leader leaves queued work behind.
    await deliver(leader.app, leader.queues.hostWork, 5, 100_000);
    const configuredByLeader = NODES - unprovisioned().length;
    // The standby's keeper runs once a minute (on the Apps' clock), each run one lease round; the
    // dead leader's lease becomes claimable past its expiry, the skew bound and the 30 s delivery
    // horizon, so within two runs of its last write a run takes the term over and discovers. (The
    // tick each losing run arms at that instant is a delayed message on real-time SQS: too slow on
    // the scaled clock to wait for here.)
    const keeperRuns = await keeperRunsUntilHolding(standby.app);
    const keeper = { wonTerms: keeperRuns.flatMap((run) => (run.wonTerm === undefined ? [] : [run.wonTerm])) };
    const deadline = performance.now() + 30_000;
    while (unprovisioned().length > 0 && performance.now() < deadline) {
      if ((await deliver(standby.app, standby.queues.hostWork)) === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // The dead leader's queued work reaches the new leader (a shared queue, or an operator redrive).
    const recordsBefore = fleet.record.length;
    let leftover = 0;
    for (let delivered = await deliver(standby.app, leader.queues.hostWork); delivered > 0; delivered = await deliver(standby.app, leader.queues.hostWork)) leftover += delivered;

    // Assert
    expect([eastDiscovery.paused, westDiscovery.paused].sort()).toEqual([false, true]);
    expect(configuredByLeader).toBeGreaterThan(0);
    expect(keeper.wonTerms).toEqual([2]);
    // Each losing run armed one tick for the moment the lease becomes claimable; the winning run the holder's minute of ticks.
    expect(keeperRuns.map((run) => run.armed)).toEqual([...keeperRuns.slice(0, -1).map(() => 1), KEEPER_RATE_MS / LEASE.keepIntervalMs]);
    const newTerm = journal.wonTerms.find((won) => won.term === 2);
    expect(newTerm?.deployment).not.toBe(leaderName);
    const late = journal.attempts.filter((attempt) => attempt.deployment === leaderName && attempt.at > (newTerm?.at ?? 0));
    expect(late).toEqual([]);
    expect(journal.attempts.filter((attempt) => attempt.deployment !== leaderName).every((attempt) => attempt.term === 2)).toBe(true);
    expect(unprovisioned()).toEqual([]);
    for (const identity of fleet.identities) expect(configures(identity), identity).toBe(1);
    expect(leftover).toBeGreaterThan(0);
    expect(fleet.record.length).toBe(recordsBefore);
    recordScenario(task, { area: "leadership", load: NODES, faults: 2, duplicateSends: late.length, hostsLost: unprovisioned().length });
  });
});
