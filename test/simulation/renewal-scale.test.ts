/**
 * Renewal at scale, simulated: 100,000 provisioned hosts whose credentials expire within one hour,
 * renewed by the real Renewal use case (in-memory stores, a virtual clock, nodes that come back
 * with new credentials a few minutes after reprovision). What each node received is recorded at
 * the node, so "none twice, none missed" is counted where the effect lands.
 */
import { describe, expect, it } from "vitest";
import { status } from "../../lib/app/operator/functions";
import { RenewalOperator } from "../../lib/app/operator/renewal-operator";
import { InMemoryQueue } from "../support/fakes";
import { EXTRA_METRIC } from "../../lib/ports/metric-names";
import { HOUR_MS, MINUTE_MS, renewalWorld, SITE, TERM, type RenewalWorld } from "../support/renewal";

const DAY_MS = 24 * HOUR_MS;
const FLEET = 100_000;
/** DynamoDB's item size limit: renewal's state must stay far below it whatever the fleet's size. */
const ITEM_LIMIT_BYTES = 400 * 1024;

/** Provisions the fleet: expiries spread over one hour starting `startsIn` from now. */
async function provisionFleet(w: RenewalWorld, startsIn: number): Promise<Map<string, number>> {
  const expiry = new Map<string, number>();
  const clusterStart = w.clock.now() + startsIn;
  for (let index = 0; index < FLEET; index++) {
    const identity = `node-${String(index).padStart(6, "0")}.example.net`;
    const expiresAt = clusterStart + Math.floor((index / FLEET) * HOUR_MS);
    expiry.set(identity, expiresAt);
    await w.provision(identity, expiresAt, 30 * DAY_MS);
  }
  return expiry;
}

/** Runs the schedule once a minute until every node is back, or `until`; returns the largest renewal state, in bytes of JSON. */
async function runUntilAllBack(w: RenewalWorld, until: number): Promise<number> {
  const allBack = () => [...w.nodes.values()].every((node) => node.backAt.length > 0);
  let largest = 0;
  while (w.clock.now() < until && !allBack()) {
    await w.run();
    largest = Math.max(largest, JSON.stringify((await w.store.read(SITE)).state).length);
    await w.advance(MINUTE_MS);
  }
  await w.run();
  return largest;
}

/** The most requests in any minute, and the most hosts out of service at once, from the nodes' records. */
function fromTheNodes(w: RenewalWorld, start: number): { mostPerMinute: number; mostOut: number } {
  const perMinute = new Map<number, number>();
  const changes: Array<{ at: number; change: number }> = [];
  for (const node of w.nodes.values()) {
    for (const at of node.reprovisionedAt) {
      const minute = Math.floor((at - start) / MINUTE_MS);
      perMinute.set(minute, (perMinute.get(minute) ?? 0) + 1);
      changes.push({ at, change: 1 });
    }
    for (const at of node.backAt) changes.push({ at, change: -1 });
  }
  changes.sort((a, b) => a.at - b.at || a.change - b.change);
  let out = 0;
  let mostOut = 0;
  for (const { change } of changes) mostOut = Math.max(mostOut, (out += change));
  return { mostPerMinute: Math.max(...perMinute.values()), mostOut };
}

describe(`renewal of ${FLEET.toLocaleString("en")} hosts whose credentials expire within one hour`, () => {
  it("renews every host once, inside its window and before expiry, within the rate and the in-flight bound", { timeout: 600_000 }, async () => {
    // Arrange: a 3 h window; 1,000 a minute renews the fleet in 100 minutes; nodes are back in 3 minutes.
    const w = renewalWorld({ before: { ms: 3 * HOUR_MS }, ratePerMinute: 1_000, maxInFlight: 2_000 });
    const start = w.clock.now();
    const expiry = await provisionFleet(w, 3 * HOUR_MS);

    // Act
    const largestState = await runUntilAllBack(w, start + 4 * HOUR_MS);

    // Assert, from what the nodes recorded.
    let missed = 0;
    let twice = 0;
    let outsideWindow = 0;
    for (const [identity, node] of w.nodes) {
      const expiresAt = expiry.get(identity) as number;
      if (node.reprovisionedAt.length === 0 || !(node.backAt[0]! < expiresAt)) missed++;
      if (node.reprovisionedAt.length > 1) twice++;
      if (node.reprovisionedAt[0]! < expiresAt - 3 * HOUR_MS) outsideWindow++;
    }
    expect({ missed, twice, outsideWindow }).toEqual({ missed: 0, twice: 0, outsideWindow: 0 });
    const { mostPerMinute, mostOut } = fromTheNodes(w, start);
    expect(mostPerMinute).toBeLessThanOrEqual(1_000);
    expect(mostOut).toBeLessThanOrEqual(2_000);
    expect(w.metrics.total(EXTRA_METRIC.renewalsCompleted)).toBe(FLEET);
    expect(largestState).toBeLessThan(ITEM_LIMIT_BYTES);
  });

  it("carries out renew --all on the whole fleet: one small request, every host once, at the request's rate", { timeout: 600_000 }, async () => {
    // Arrange: automatic renewal off; the credentials are far from expiry.
    const w = renewalWorld({ enabled: false, ratePerMinute: 10, maxInFlight: 2_000 });
    const start = w.clock.now();
    await provisionFleet(w, 20 * DAY_MS);
    const operator = new RenewalOperator({ site: SITE, operator: { currentTerm: async () => TERM }, registry: w.registry, store: w.store, clock: w.clock });
    // The leader's renew runs are going: a request is refused where none runs.
    await w.run();

    // Act
    const requested = await operator.request({ selection: { all: true }, ratePerMinute: 1_000, dryRun: false, by: "ops" });
    const stored = JSON.stringify((await w.store.read(SITE)).state).length;
    // 2,000 in flight back in 3 minutes sustain 667 a minute: the fleet takes 150 minutes.
    await runUntilAllBack(w, start + 3 * HOUR_MS);
    const after = await operator.report();

    // Assert
    expect(requested.hosts).toHaveLength(FLEET);
    expect(stored).toBeLessThan(1_000);
    const counts = [...w.nodes.values()].map((node) => node.reprovisionedAt.length);
    expect(counts.filter((count) => count !== 1)).toEqual([]);
    expect(fromTheNodes(w, start).mostPerMinute).toBeLessThanOrEqual(1_000);
    expect(fromTheNodes(w, start).mostOut).toBeLessThanOrEqual(2_000);
    expect(after.requested).toBeUndefined();
  });

  it("says so in status, the shortfall gauge and the log when the rate cannot keep up, before any host expires", { timeout: 600_000 }, async () => {
    // Arrange: credentials issued now, expiring within one hour 25 days out, a 20% window (5 days):
    // 100,000 sent by expiry less renew.timeout need 100,000 / (7,200 - 15) minutes, 14 a minute.
    const renew = { before: { fraction: 0.2 }, ratePerMinute: 10, maxInFlight: 500, timeoutMs: 15 * MINUTE_MS };
    const w = renewalWorld(renew);
    await provisionFleet(w, 25 * DAY_MS);
    const queue = () => new InMemoryQueue();
    const deps = { site: SITE, deploymentId: "east", leaderElection: false, registry: w.registry, renewalStore: w.store, clock: w.clock };
    const queues = { hostWork: queue(), hostWorkDlq: queue(), lifecycle: queue(), lifecycleDlq: queue() };

    // Act
    await w.run();
    const slow = await status({ ...deps, queues, renew });
    const fast = await status({ ...deps, queues, renew: { ...renew, ratePerMinute: 14 } });

    // Assert
    expect(slow.renewal.capacity).toMatchObject({ canKeepUp: false, requiredRatePerMinute: 14, ratePerMinute: 10, shortfallPerMinute: 4 });
    expect(slow.renewal.capacity?.hostsThatWouldExpire).toBeGreaterThan(0);
    expect(fast.renewal.capacity).toMatchObject({ canKeepUp: true, shortfallPerMinute: 0 });
    expect(w.metrics.of(EXTRA_METRIC.renewalCapacityShortfall).at(-1)?.value).toBe(4);
    expect(w.logger.at("error").map((record) => record.message)).toContainEqual(expect.stringContaining("renewal cannot keep up"));
    expect(slow.renewal.expiry.expired).toBe(0);
  });
});
