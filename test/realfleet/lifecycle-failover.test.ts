/**
 * Startup events through Choria Streams across a leader crash, on go-choria's own broker with
 * Streams on (dev/local/real-fleet-broker.ts): a leader and a standby deployment (protocol v2,
 * jwt + ed25519) and real servers booted one by one in three groups:
 *
 * - EARLY, while the leader leads: their startup events reach its bridge through the site's durable
 *   consumer on go-choria's CHORIA_EVENTS stream (choria account, dev/local/real-fleet-stack.ts);
 * - GAP, just after the leader was killed (stack `kill()`: its schedules and pollers stop, nothing
 *   it sends reaches DynamoDB or SQS): nobody leads, so their events wait in the stream;
 * - LATE, after the standby won the lease and ran the discovery a new term starts with.
 *
 * Discovery runs on a schedule (`interval`, the discover function's rate) and once more whenever a
 * term is won. Here both are an hour, so after a term's first discovery the only way a node is
 * admitted is its startup event: EARLY and LATE nodes boot after their term's discovery ran and can
 * be provisioned only from their events. GAP nodes are up when the standby's term starts, so its
 * discovery may find one before the bridge hands over its event; either admits it once.
 *
 * What counts is observed at the nodes and in what the stack records, not in the bridge's
 * internals (so the test holds whichever function reads the stream): every node published one
 * provisioning-mode startup event; every node was admitted exactly once (one registry entry, under
 * the term of the deployment that handled it; the lifecycle function's "admitted host from its
 * startup event" line at most once, and exactly once for EARLY and LATE); the crashed leader
 * provisioned exactly EARLY and the standby exactly GAP + LATE; no event was dropped, dead-lettered
 * or left in the consumer; every node was configured and restarted once and arrived at the target
 * broker. Every bridge run read JetStream ("lifecycle events taken", mode "jetstream").
 *
 * It also pins what go-choria's accounts allow (docs/lifecycle.md): the provisioner's own
 * connection (user `provisioner`, provisioning account) has no JetStream, the broker's CHORIA_EVENTS
 * captures the startup subject, and a stream for that subject of one's own is refused.
 *
 * Figures (startup event -> admission latency, the failover) are printed as `real-fleet
 * lifecycle-failover figures`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connect } from "nats";
import { createDynamoDbClient } from "../../lib/dynamodb/client";
import { querySite } from "../../lib/dynamodb/site-query";
import { defaultConsumerName } from "../../lib/nats/lifecycle-event-source";
import { lifecycleSubject } from "../../lib/choria/lifecycle";
import { EXTRA_METRIC, METRIC } from "../../lib/ports/metric-names";
import { LOCAL_AWS } from "../../dev/local/services";
import {
  brokerConnectOptions,
  lifecycleReaderCredentials,
  provisionedFleet,
  provisionerCredentials,
  provisioningActions,
  waitForArrivals,
  waitUntil,
  type ProvisionedFleet,
} from "../../dev/local/real-fleet-stack";
import { retriedOnPortClash } from "../support/port-clash";
import { eventAdmissionBoundMs, NODE_CONNECT_BOUND_MS, provisionBoundMs, termBoundMs } from "../support/real-fleet-bounds";

const EARLY = ["e1.lfo.real.example.net", "e2.lfo.real.example.net", "e3.lfo.real.example.net"];
const GAP = ["g1.lfo.real.example.net", "g2.lfo.real.example.net", "g3.lfo.real.example.net"];
const LATE = ["l1.lfo.real.example.net", "l2.lfo.real.example.net", "l3.lfo.real.example.net"];
const ALL = [...EARLY, ...GAP, ...LATE];
/** Between two boots of a group: the events arrive one by one, as from a rack powering up. */
const STAGGER_MS = 3_000;
/** The discovery schedule and `interval`: no scheduled discovery within the test. */
const DISCOVERY_INTERVAL_MS = 3_600_000;
/** The fast lease (dev/local/stack.ts): 30 s, kept every 2 s, 1 s skew bound. */
const LEASE_DURATION_MS = 30_000;
const SETUP_HOOK_MS = 30 * 60_000;
const ADMITTED_FROM_EVENT = "admitted host from its startup event";
const STARTUP_SUBJECT = lifecycleSubject("startup", "provision_mode_server");

interface Lease {
  holder: string;
  term: number;
}

interface RegistryEntry {
  identity: string;
  term: number;
  source: string | undefined;
  state: string | undefined;
}

describe("real fleet, startup events through Choria Streams across a leader crash", () => {
  let provisioned: ProvisionedFleet;
  let leaderBefore: Lease;
  let leaderAfter: Lease;
  let registry: RegistryEntry[] = [];
  let consumer: { pending: number; ackPending: number; delivered: number; redelivered: number } | undefined;
  const figures: Record<string, number | string> = {};

  beforeAll(async () => {
    provisioned = await retriedOnPortClash(() =>
      provisionedFleet({
        identities: ALL,
        protocolV2: true,
        features: ["jwt", "ed25519"],
        deployments: ["blue", "green"],
        dynamoDbEndpoint: inject("dynamoEndpoint"),
        config: () => ({ interval: "1h" }),
        stack: { timings: { discoverRateMs: DISCOVERY_INTERVAL_MS } },
      }),
    );
    const { stack, logs } = provisioned;
    const timings = stack.timings;
    const eventToArrival = NODE_CONNECT_BOUND_MS + eventAdmissionBoundMs(timings) + provisionBoundMs(timings);
    // The lease runs out (duration + skew) after the leader last kept it, the 30 s rpc_ttl delivery
    // horizon passes (a failover takes ~61-63 s, dev/local/stack.ts), then the standby's keeper claims it.
    const failoverBound = 3 * LEASE_DURATION_MS + termBoundMs(timings);
    // A won term's discovery: the keeper's round that wins it, then one discovery invocation at most.
    const termDiscoveryBound = termBoundMs(timings) + timings.discoverTimeoutMs;
    const started = Date.now();
    stack.start();

    // The leader's term and the discovery it starts with (it finds nothing: no node runs yet).
    const first = await waitForLease(provisioned, termBoundMs(timings) + LEASE_DURATION_MS);
    leaderBefore = first;
    await waitForTermDiscovery(provisioned, first.term, termDiscoveryBound);
    await bootStaggered(provisioned, EARLY);
    await waitForArrivals(provisioned, EARLY, eventToArrival + EARLY.length * STAGGER_MS);

    const leader = stack.deployments.find((deployment) => deployment.id === first.holder);
    if (!leader) throw new Error(`lease holder ${first.holder} is not a deployment`);
    const crashedAt = Date.now();
    leader.kill();
    await bootStaggered(provisioned, GAP);
    const gapBootedAt = Date.now();

    const deadline = Date.now() + failoverBound;
    let after: Lease | undefined;
    while (!after) {
      const current = await stack.lease();
      if (current && current.holder !== first.holder) after = { holder: current.holder, term: current.term };
      else if (Date.now() > deadline) throw new Error(`the standby took no lease within ${failoverBound} ms of the crash`);
      else await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const tookOverAt = Date.now();
    leaderAfter = after;
    figures.leaseMovedAfterCrashSeconds = seconds(tookOverAt - crashedAt);
    figures.gapBootedBeforeTakeover = gapBootedAt < tookOverAt ? "yes" : "no";
    await waitForTermDiscovery(provisioned, after.term, termDiscoveryBound);
    await bootStaggered(provisioned, LATE);
    await waitForArrivals(provisioned, ALL, eventToArrival + LATE.length * STAGGER_MS);
    figures.crashToLastArrivalSeconds = seconds(Date.now() - crashedAt);
    figures.totalSeconds = seconds(Date.now() - started);

    registry = await readRegistry(provisioned);
    consumer = await readConsumer(provisioned);

    const startupAt = new Map(provisioned.provisioningEvents.of("startup", "provision_mode_server").map((event) => [event.identity, event.at]));
    const admittedAt = new Map(logs.of(ADMITTED_FROM_EVENT).map((record) => [String(record.attributes?.identity), record.at]));
    const latency = (identities: string[]) => identities.filter((identity) => admittedAt.has(identity)).map((identity) => admittedAt.get(identity)! - startupAt.get(identity)!);
    const steady = latency([...EARLY, ...LATE]);
    figures.eventToAdmissionP50Ms = percentile(steady, 0.5);
    figures.eventToAdmissionP99Ms = percentile(steady, 0.99);
    const gap = latency(GAP);
    figures.gapEventsAdmittedFromEvent = gap.length;
    figures.gapEventToAdmissionMaxSeconds = gap.length > 0 ? seconds(Math.max(...gap)) : "-";
    figures.gapSources = GAP.map((identity) => registry.find((entry) => entry.identity === identity)?.source ?? "?").join(",");
    figures.leaderBefore = `${leaderBefore.holder}@${leaderBefore.term}`;
    figures.leaderAfter = `${leaderAfter.holder}@${leaderAfter.term}`;
    figures.consumerRedelivered = consumer?.redelivered ?? "?";
    for (const deployment of stack.deployments) {
      figures[`provisionedBy_${deployment.id}`] = deployment.metrics.total(METRIC.provisioned);
      figures[`eventsReceivedBy_${deployment.id}`] = deployment.metrics.total(EXTRA_METRIC.lifecycleEventsReceived);
    }
    process.stdout.write(`real-fleet lifecycle-failover figures: ${JSON.stringify(figures)}\n`);
  }, SETUP_HOOK_MS);

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("reads the startup events from JetStream in every bridge run", () => {
    const modes = provisioned.logs.of("lifecycle events taken").map((record) => record.attributes?.mode);
    expect(modes.length).toBeGreaterThan(0);
    expect(modes.filter((mode) => mode !== "jetstream")).toEqual([]);
    expect(provisioned.logs.of("no JetStream stream holds lifecycle events, listening on core NATS")).toEqual([]);
  });

  it("moves the lease to the standby with a higher term", () => {
    expect(leaderAfter.holder).not.toBe(leaderBefore.holder);
    expect(leaderAfter.term).toBeGreaterThan(leaderBefore.term);
  });

  it("sees one provisioning-mode startup event from each node", () => {
    const events = provisioned.provisioningEvents.of("startup", "provision_mode_server").map((event) => event.identity);
    expect(events.sort()).toEqual([...ALL].sort());
  });

  it("admits every node exactly once, under the term of the deployment that handled its event", () => {
    expect(registry.map((entry) => entry.identity).sort()).toEqual([...ALL].sort());
    for (const entry of registry) {
      const term = EARLY.includes(entry.identity) ? leaderBefore.term : leaderAfter.term;
      expect({ identity: entry.identity, term: entry.term }).toEqual({ identity: entry.identity, term });
      if (!GAP.includes(entry.identity)) expect({ identity: entry.identity, source: entry.source }).toEqual({ identity: entry.identity, source: "event" });
    }
    const fromEvents = provisioned.logs.of(ADMITTED_FROM_EVENT).map((record) => ({ identity: String(record.attributes?.identity), term: Number(record.attributes?.term) }));
    for (const identity of ALL) {
      const admissions = fromEvents.filter((admission) => admission.identity === identity);
      // A GAP node may have been admitted by the standby's first discovery instead: then by no event.
      if (GAP.includes(identity)) expect({ identity, admissions: admissions.length }).toEqual({ identity, admissions: expect.toBeOneOf([0, 1]) });
      else expect({ identity, admissions: admissions.length }).toEqual({ identity, admissions: 1 });
      for (const admission of admissions) expect(admission.term).toBe(EARLY.includes(identity) ? leaderBefore.term : leaderAfter.term);
    }
  });

  it("has the crashed leader provision exactly EARLY and the standby the rest; drops, dead-letters and leaves no event", () => {
    const byId = (id: string) => provisioned.stack.deployments.find((deployment) => deployment.id === id)!;
    const crashed = byId(leaderBefore.holder);
    const standby = byId(leaderAfter.holder);
    expect({ crashed: crashed.metrics.total(METRIC.provisioned), standby: standby.metrics.total(METRIC.provisioned) }).toEqual({
      crashed: EARLY.length,
      standby: GAP.length + LATE.length,
    });
    for (const deployment of [crashed, standby]) {
      expect({ id: deployment.id, dropped: deployment.metrics.total(EXTRA_METRIC.lifecycleEventsDropped), deadLettered: deployment.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered) }).toEqual({
        id: deployment.id,
        dropped: 0,
        deadLettered: 0,
      });
    }
    // Each deployment's lifecycle function got the events of the nodes it handled (a redelivered copy would only add).
    expect(crashed.metrics.total(EXTRA_METRIC.lifecycleEventsReceived)).toBeGreaterThanOrEqual(EARLY.length);
    expect(standby.metrics.total(EXTRA_METRIC.lifecycleEventsReceived)).toBeGreaterThanOrEqual(GAP.length + LATE.length);
    // The site's one durable consumer delivered every event and has none left or unacknowledged.
    expect(consumer).toBeDefined();
    expect({ pending: consumer!.pending, ackPending: consumer!.ackPending }).toEqual({ pending: 0, ackPending: 0 });
    expect(consumer!.delivered).toBeGreaterThanOrEqual(ALL.length);
  });

  it("configures and restarts every node once; all leave provisioning mode and arrive at the target broker", async () => {
    for (const identity of ALL) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: 1, restarted: 1 });
      expect((await node.config())?.["plugin.choria.server.provision"]).toBe("false");
      expect(node.running).toBe(true);
    }
    const arrivals = provisioned.targetEvents.of("startup").map((event) => event.identity);
    expect(arrivals.sort()).toEqual([...ALL].sort());
  });

  it("keeps the events in go-choria's CHORIA_EVENTS (choria account); the provisioning account has no JetStream", async () => {
    const { fleet } = provisioned;
    const reader = await connect(await brokerConnectOptions(fleet.provisioningBroker, fleet.ca.certPem, lifecycleReaderCredentials(fleet), "test-reader"));
    try {
      const jsm = await reader.jetstreamManager();
      expect(await jsm.streams.find(STARTUP_SUBJECT)).toBe("CHORIA_EVENTS");
      expect((await jsm.streams.info("CHORIA_EVENTS")).config.subjects).toEqual(["choria.lifecycle.>"]);
      // What docs/lifecycle.md used to tell an operator to run: refused, the subjects overlap CHORIA_EVENTS'.
      await expect(jsm.streams.add({ name: "CHORIA_LIFECYCLE", subjects: ["choria.lifecycle.event.>"] })).rejects.toThrow(/overlap/);
    } finally {
      await reader.close();
    }
    const provisioner = await connect(await brokerConnectOptions(fleet.provisioningBroker, fleet.ca.certPem, provisionerCredentials(fleet), "test-provisioner"));
    try {
      await expect(provisioner.jetstreamManager({ timeout: 2_000 })).rejects.toThrow();
    } finally {
      await provisioner.close();
    }
  });
});

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}

function percentile(values: number[], p: number): number | string {
  if (values.length === 0) return "-";
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

async function bootStaggered(provisioned: ProvisionedFleet, identities: string[]): Promise<void> {
  for (const [index, identity] of identities.entries()) {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, STAGGER_MS));
    await provisioned.fleet.nodes.get(identity)!.start();
  }
}

async function waitForLease(provisioned: ProvisionedFleet, timeoutMs: number): Promise<Lease> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lease = await provisioned.stack.lease();
    if (lease) return { holder: lease.holder, term: lease.term };
    if (Date.now() > deadline) throw new Error(`no deployment took the lease within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The discovery a won term starts with has run (it logs how many nodes it found). */
function waitForTermDiscovery(provisioned: ProvisionedFleet, term: number, timeoutMs: number): Promise<void> {
  return waitUntil(() => {
    const ran = provisioned.logs.records.some((record) => /^discovered \d+ nodes in provisioning mode$/.test(record.message) && Number(record.attributes?.term) === term);
    return ran ? undefined : `term ${term} ran no discovery`;
  }, timeoutMs);
}

/** The site's admission entries of the fleet's nodes, straight from the table. */
async function readRegistry(provisioned: ProvisionedFleet): Promise<RegistryEntry[]> {
  const client = createDynamoDbClient({ endpoint: inject("dynamoEndpoint"), region: LOCAL_AWS.region, credentials: LOCAL_AWS.credentials });
  try {
    const items = await querySite(client, { tableName: provisioned.stack.tables.admission, site: provisioned.stack.site, consistent: true });
    return items
      .filter((item) => ALL.includes(item.identity?.S ?? ""))
      .map((item) => ({ identity: item.identity!.S!, term: Number(item.term?.N ?? 0), source: item.source?.S, state: item.state?.S }));
  } finally {
    client.destroy();
  }
}

/** The site's durable consumer on CHORIA_EVENTS, read in the choria account. */
async function readConsumer(provisioned: ProvisionedFleet) {
  const { fleet, stack } = provisioned;
  const nc = await connect(await brokerConnectOptions(fleet.provisioningBroker, fleet.ca.certPem, lifecycleReaderCredentials(fleet), "test-consumer-info"));
  try {
    const info = await (await nc.jetstreamManager()).consumers.info("CHORIA_EVENTS", defaultConsumerName(stack.site));
    return { pending: info.num_pending, ackPending: info.num_ack_pending, delivered: info.delivered.consumer_seq, redelivered: info.num_redelivered };
  } finally {
    await nc.close();
  }
}
