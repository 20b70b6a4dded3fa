/**
 * Ticks on the local stack (dev/local/stack.ts, fast timings: keeper every 10 s, lease 30 s /
 * renew_interval 2 s / skew 1 s, rpc_ttl 30 s), two deployments of one site sharing the lease
 * table. The keeper arms its minute's ticks as delayed messages on its lifecycle queue; each tick
 * keeps the lease and, while its deployment leads, admits the startup events waiting in the
 * stream (lib/app/ticks.ts). What these tests judge lands in the lease table (sampled), the
 * emulated Lambda ledger, the lifecycle stream's consumer, and the nodes.
 */
import { PurgeQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterEach, describe, expect, inject, it } from "vitest";
import { LOCAL_AWS, startNats, type RunningNats } from "../../dev/local/services";
import { startLocalStack, type LeaseView, type LocalStack } from "../../dev/local/stack";
import type { LogAttributes, Logger } from "../../lib/ports/logger";
import { killLeaderAndAwaitTakeover } from "../support/failover";
import { waitUntilAsync } from "../support/wait";

const DEPLOYMENTS = ["blue", "green"];
/** The fast timings' keeper rate, renew_interval, skew bound and lease duration. */
const KEEPER_RATE_MS = 10_000;
const RENEW_INTERVAL_MS = 2_000;
const LEASE_MS = 30_000;
/** The emulated SQS event sources' long-poll wait (their receive returns at most this late). */
const POLL_WAIT_S = 1;
/** Startup events reach admission within this of their publication while a leader runs (the p99 bound). */
const ADMISSION_BOUND_MS = 15_000;
const SAMPLE_MS = 250;

interface LeaseSample extends LeaseView {
  at: number;
}

/** Reads the lease item every SAMPLE_MS while running: what the table said, when. */
class LeaseSampler {
  readonly samples: LeaseSample[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(stack: LocalStack) {
    this.loop = (async () => {
      while (this.running) {
        const lease = await stack.lease().catch(() => undefined);
        if (lease) this.samples.push({ ...lease, at: Date.now() });
        await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
      }
    })();
  }

  async stop(): Promise<LeaseSample[]> {
    this.running = false;
    await this.loop;
    return this.samples;
  }
}

/**
 * Never two holders, as the table shows it: terms only grow, each term has one holder, and a term
 * begins (its claim: expiry less the lease duration) only after the last expiry seen of the term before.
 */
function expectOneHolderAtATime(samples: readonly LeaseSample[]): void {
  const lastOfTerm = new Map<number, LeaseSample>();
  const holders = new Map<number, Set<string>>();
  samples.forEach((sample, index) => {
    if (index > 0) expect(sample.term, JSON.stringify(sample)).toBeGreaterThanOrEqual(samples[index - 1]!.term);
    holders.set(sample.term, (holders.get(sample.term) ?? new Set()).add(sample.holder));
    const last = lastOfTerm.get(sample.term);
    if (!last || sample.expiresAt > last.expiresAt) lastOfTerm.set(sample.term, sample);
  });
  for (const [term, seen] of holders) expect([...seen], `holders of term ${term}`).toHaveLength(1);
  const terms = [...lastOfTerm.keys()].sort((a, b) => a - b);
  for (const [index, term] of terms.entries()) {
    if (index === 0) continue;
    const first = samples.find((sample) => sample.term === term)!;
    expect(first.expiresAt - LEASE_MS, `term ${term} began before term ${terms[index - 1]} ended`).toBeGreaterThanOrEqual(lastOfTerm.get(terms[index - 1]!)!.expiresAt);
  }
}

/** What the deployments logged that the tests need, per deployment, stamped with this machine's clock. */
class Journal {
  readonly lines: Array<{ deployment: string; message: string; identity: string | undefined; at: number }> = [];

  logger(deployment: string): Logger {
    const record = (message: string, attributes?: LogAttributes) => {
      const identity = typeof attributes?.identity === "string" ? attributes.identity : undefined;
      this.lines.push({ deployment, message, identity, at: Date.now() });
    };
    return { debug: record, info: record, warn: record, error: record };
  }
}

let nats: RunningNats | undefined;
let stack: LocalStack | undefined;

afterEach(async () => {
  await stack?.stop();
  await nats?.stop();
  stack = undefined;
  nats = undefined;
});

async function startStack(options: { nodes: number; journal?: Journal; discoverRateMs?: number }): Promise<LocalStack> {
  nats = await startNats();
  stack = await startLocalStack({
    nodes: options.nodes,
    deployments: DEPLOYMENTS,
    fast: true,
    restartDelayMs: 200,
    nats,
    dynamoDbEndpoint: inject("dynamoEndpoint"),
    waitTimeSeconds: POLL_WAIT_S,
    ...(options.discoverRateMs === undefined ? {} : { timings: { discoverRateMs: options.discoverRateMs } }),
    ...(options.journal ? { overrides: (deployment: string) => ({ logger: options.journal!.logger(deployment) }) } : {}),
  });
  stack.start();
  await stack.started;
  return stack;
}

/** The leader's lifecycle invocations so far: its ticks (nothing else reaches its lifecycle queue here). */
const ticksOf = (running: LocalStack, deployment: string) => running.ledger.count(running.deployments.find((candidate) => candidate.id === deployment)!.functions.lifecycle);

async function waitForTicks(running: LocalStack, deployment: string, more: number, timeoutMs: number): Promise<number> {
  const from = ticksOf(running, deployment);
  const started = Date.now();
  await waitUntilAsync(async () => (ticksOf(running, deployment) >= from + more ? undefined : `${deployment} ran ${ticksOf(running, deployment) - from} of ${more} ticks`), timeoutMs, 50);
  return Date.now() - started;
}

describe("ticks on the local stack", () => {
  it("lost ticks are followed by restarted ticks within a keeper period, the leader keeping its lease throughout and never two holders", async () => {
    // Arrange: blue leads and ticks.
    const running = await startStack({ nodes: 2 });
    const leader = running.deployments[0]!;
    await waitUntilAsync(async () => ((await running.lease())?.holder === leader.id ? undefined : "blue does not lead yet"), 2 * LEASE_MS);
    const sampler = new LeaseSampler(running);
    await waitForTicks(running, leader.id, 2, 2 * KEEPER_RATE_MS);
    const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: running.sqs.url });

    // Act: every tick on the leader's lifecycle queue is dropped for longer than a keeper period
    // (the queue purged every 100 ms: a tick is lost before it becomes visible, or right after).
    const dropUntil = Date.now() + KEEPER_RATE_MS + 5_000;
    const ticksBefore = ticksOf(running, leader.id);
    while (Date.now() < dropUntil) {
      await sqs.send(new PurgeQueueCommand({ QueueUrl: leader.queues.lifecycle }));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await sqs.send(new PurgeQueueCommand({ QueueUrl: leader.queues.lifecycle }));
    const ranWhileDropped = ticksOf(running, leader.id) - ticksBefore;
    // Every tick armed before this instant is gone: the next keeper run arms the next ones.
    const restartedAfterMs = await waitForTicks(running, leader.id, 2, 3 * KEEPER_RATE_MS);
    await new Promise((resolve) => setTimeout(resolve, 2 * RENEW_INTERVAL_MS));
    const samples = await sampler.stop();
    sqs.destroy();

    // Assert
    process.stdout.write(`lost ticks: ${ranWhileDropped} ticks slipped through the purges; ticks restarted ${restartedAfterMs} ms after the drops ended\n`);
    // Within one keeper period (its next run arms them), then the first tick's delay (renew_interval,
    // whole seconds) and the event source's poll; the second tick one renew_interval later. A
    // second of slack for the invocations themselves.
    expect(restartedAfterMs).toBeLessThanOrEqual(KEEPER_RATE_MS + 2 * RENEW_INTERVAL_MS + POLL_WAIT_S * 1_000 + 1_000);
    // The keeper's own round every 10 s kept the 30 s lease while its ticks were lost: one term, blue's.
    expect(new Set(samples.map((sample) => `${sample.holder}@${sample.term}`))).toEqual(new Set([`${leader.id}@${samples[0]!.term}`]));
    expect(samples.every((sample, index) => index === 0 || sample.expiresAt >= samples[index - 1]!.expiresAt)).toBe(true);
    // Never out of date by more than a lease: the item was kept before it expired every time.
    for (const sample of samples) expect(sample.expiresAt, JSON.stringify(sample)).toBeGreaterThan(sample.at - SAMPLE_MS);
    expectOneHolderAtATime(samples);
  }, 180_000);

  it("the leader killed while startup events arrive: every event admitted once, by the leader within 15 s or by its successor within 15 s of taking over", async () => {
    // Arrange: no periodic discovery during the test (its rate far beyond it), so hosts are
    // admitted from their startup events; a won term's discovery still runs once, at the takeover.
    const journal = new Journal();
    const running = await startStack({ nodes: 0, journal, discoverRateMs: 10 * 60_000 });
    const sampler = new LeaseSampler(running);
    const published: string[] = [];

    // Act: a node boots in provisioning mode and announces itself every 2 s for 100 s; 20 s in, the
    // leader dies; its successor takes over ~62-74 s later (lease, skew, delivery horizon, keeper).
    const publishing = (async () => {
      for (let index = 0; index < 50; index++) {
        published.push(...(await running.fleet.addNodes(1)));
        await new Promise((resolve) => setTimeout(resolve, 2_000));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    const takeover = await killLeaderAndAwaitTakeover(running, Date.now() + 120_000);
    await publishing;
    await waitUntilAsync(async () => {
      const events = await running.lifecycleEvents();
      const waiting = published.filter((identity) => !running.fleet.node(identity).inNormalMode);
      return events.pendingInStream === 0 && waiting.length === 0 ? undefined : `${events.pendingInStream} events in the stream, ${waiting.length} nodes not provisioned`;
    }, 60_000);
    const samples = await sampler.stop();

    // Assert
    const startups = running.fleet.lifecycleEvents.filter((entry) => entry.event.component === "provision_mode_server" && entry.event.type === "startup");
    const admittedFromEvent = journal.lines.filter((line) => line.message === "admitted host from its startup event");
    /**
     * How a startup event was handled, by whichever deployment took it: admitted; or its host found
     * admitted, or already provisioned since it announced itself (both by the successor's won-term
     * discovery, which may reach a host before its waiting event).
     */
    const outcomes = ["admitted host from its startup event", "host admitted recently, not admitting it again", "dropping a startup event the node sent before it was last provisioned"];
    const handled = journal.lines.filter((line) => outcomes.includes(line.message));
    const byDeployment = Object.fromEntries(DEPLOYMENTS.map((id) => [id, admittedFromEvent.filter((line) => line.deployment === id).length]));
    process.stdout.write(`failover under startup events: ${startups.length} published, admitted from their events ${JSON.stringify(byDeployment)}, takeover ${(takeover.tookOverAt - takeover.killedAt) / 1000} s after the kill\n`);
    expect(startups.length).toBe(published.length);
    for (const { event } of startups) {
      const admissions = admittedFromEvent.filter((line) => line.identity === event.identity);
      // None twice: at most one admission from the event, by one deployment.
      expect(admissions.length, `${event.identity} admitted from its event by ${admissions.map((line) => line.deployment).join(", ")}`).toBeLessThanOrEqual(1);
      // None lost: taken by a leader, admitted then or found admitted; the node ends provisioned.
      const first = handled.find((line) => line.identity === event.identity);
      const seen = journal.lines.filter((line) => line.identity === event.identity).map((line) => `${line.deployment}: ${line.message}`);
      expect(first, `${event.identity}'s startup event: ${JSON.stringify(seen.slice(0, 12))}`).toBeDefined();
      expect(running.fleet.node(event.identity).inNormalMode).toBe(true);
      // The bound: 15 s from publication (whole seconds on the node: a second more) while a leader
      // runs; an event the dead leader could not take within that waits for the successor, whose
      // first tick takes it (a failover + a tick), so its bound is 15 s from the takeover.
      const publishedAt = event.timestamp * 1_000 + 1_000;
      const leaderRan = publishedAt + ADMISSION_BOUND_MS < takeover.killedAt;
      const bound = (leaderRan ? publishedAt : Math.max(publishedAt, takeover.tookOverAt)) + ADMISSION_BOUND_MS;
      expect(first!.at, `${event.identity} published at ${publishedAt}, leader killed at ${takeover.killedAt}, successor from ${takeover.tookOverAt}`).toBeLessThanOrEqual(bound);
    }
    expect(admittedFromEvent.some((line) => line.deployment === takeover.killed.id)).toBe(true);
    expect(handled.some((line) => line.deployment === takeover.successor.id)).toBe(true);
    expect(takeover.tookOverAt).toBeLessThanOrEqual(takeover.protocolBound);
    expect((await running.lifecycleEvents()).pendingInStream).toBe(0);
    expectOneHolderAtATime(samples);
  }, 180_000);
});
