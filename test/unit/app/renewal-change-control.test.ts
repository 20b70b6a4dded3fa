/**
 * Renewal under change control (docs/renewal.md, "Change control"), through the real Renewal use
 * case on the in-memory renewal world: slow start ramps the rate as renewals succeed, the abort rule
 * pauses a wave whose first attempts fail too often once the sample is large enough, and the due
 * hosts go inside the windows unless one would expire before the next allowed moment. What was
 * sent, and when, is counted at the nodes.
 */
import { describe, expect, it } from "vitest";
import { status } from "../../../lib/app/operator/functions";
import { RenewalOperator } from "../../../lib/app/operator/renewal-operator";
import { formatRenewalReport } from "../../../cli/renew";
import { InMemoryQueue, RecordingLogger, RecordingMetrics } from "../../support/fakes";
import { Renewal } from "../../../lib/app/renewal";
import { renewalReport } from "../../../lib/app/renewal-state";
import { parseCron } from "../../../lib/config/cron";
import { RenewCalendar, type CalendarEntry } from "../../../lib/config/renew-calendar";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { HOUR_MS, MINUTE_MS, renewalWorld, SITE, TERM, type RenewalWorld } from "../../support/renewal";

const DAY_MS = 24 * HOUR_MS;

function entry(cron: string, durationMs: number): CalendarEntry {
  const parsed = parseCron(cron);
  if (!("schedule" in parsed)) throw new Error(parsed.problems.join("; "));
  return { cron: parsed.schedule, timezone: "UTC", durationMs, duration: `${durationMs / MINUTE_MS}m` };
}

/** `count` hosts expiring `in` from now: with the world's 6 h window, all due now when `in` is 3 h. */
async function fleet(w: RenewalWorld, prefix: string, count: number, expiresIn: number): Promise<string[]> {
  const identities = Array.from({ length: count }, (_, index) => `${prefix}-${String(index).padStart(4, "0")}.example.net`);
  for (const identity of identities) await w.provision(identity, w.clock.now() + expiresIn, 30 * DAY_MS);
  return identities;
}

/** Requests the nodes ran in each minute from `start`. */
function sendsPerMinute(w: RenewalWorld, start: number): number[] {
  const minutes: number[] = [];
  for (const node of w.nodes.values()) {
    for (const at of node.reprovisionedAt) {
      const minute = Math.floor((at - start) / MINUTE_MS);
      minutes[minute] = (minutes[minute] ?? 0) + 1;
    }
  }
  return Array.from(minutes, (count) => count ?? 0);
}

async function runMinutes(w: RenewalWorld, minutes: number): Promise<void> {
  for (let minute = 0; minute < minutes; minute++) {
    await w.run();
    await w.advance(MINUTE_MS);
  }
}

describe("slow start", () => {
  it("starts a wave at renew.start_rate and doubles it every 5 successes up to renew.rate, counted at the nodes", async () => {
    // Arrange: 2,000 hosts due now; nodes are back 3 minutes after reprovision.
    const w = renewalWorld({ ratePerMinute: 100, maxInFlight: 1_000, slowStart: { startRate: 5, increase: 2, successesPerStep: 5 } });
    await fleet(w, "web", 2_000, 3 * HOUR_MS);
    const start = w.clock.now();

    // Act
    await runMinutes(w, 15);
    const report = renewalReport([...(await w.registry.expiries())], (await w.store.read(SITE)).state, SITE, w.clock.now());

    // Assert: each run sent exactly the rate it had ramped to (more than enough were due), which
    // only went up, from 5 (nothing back yet for 3 minutes) to renew.rate.
    const perMinute = sendsPerMinute(w, start);
    const rates = w.metrics.values(EXTRA_METRIC.renewalRate);
    expect(perMinute).toEqual(rates);
    expect(rates.slice(0, 3)).toEqual([5, 5, 5]);
    expect(rates.every((rate, index) => index === 0 || rate >= (rates[index - 1] as number))).toBe(true);
    expect(rates.at(-1)).toBe(100);
    expect(rates.filter((rate) => rate > 5 && rate < 100).length).toBeGreaterThan(1);
    expect(report.wave).toMatchObject({ startedAt: start, ratePerMinute: 100, failures: 0 });
  });

  it("keeps the wave's ramp across a failover: the new leader's renewal goes on at the rate the old one reached, counted at the nodes", async () => {
    // Arrange: blue ramps for 8 minutes; green is another deployment's Renewal over the site's one
    // renewal state and registry, with its own logger and metrics.
    const w = renewalWorld({ ratePerMinute: 100, maxInFlight: 1_000, slowStart: { startRate: 5, increase: 2, successesPerStep: 5 } });
    await fleet(w, "web", 2_000, 3 * HOUR_MS);
    await runMinutes(w, 8);
    const reached = (await w.store.read(SITE)).state.wave?.ratePerMinute ?? 0;
    const greenMetrics = new RecordingMetrics();
    w.renewal = new Renewal({ settings: w.settings, gate: w.gate, registry: w.registry, store: w.store, rpc: w.rpc, prepareRpc: async () => undefined, clock: w.clock, logger: new RecordingLogger(), metrics: greenMetrics });
    const takeover = w.clock.now();

    // Act
    await runMinutes(w, 1);

    // Assert: green's first run sent what blue had ramped to, not renew.start_rate again.
    expect(reached).toBeGreaterThan(5);
    expect(sendsPerMinute(w, takeover)[0]).toBe(greenMetrics.lastGauge(EXTRA_METRIC.renewalRate));
    expect(greenMetrics.lastGauge(EXTRA_METRIC.renewalRate)).toBeGreaterThanOrEqual(reached);
  });

  it("without renew.start_rate sends at renew.rate from the first run, as before", async () => {
    // Arrange
    const w = renewalWorld({ ratePerMinute: 100 });
    await fleet(w, "web", 300, 3 * HOUR_MS);
    const start = w.clock.now();

    // Act
    await runMinutes(w, 2);

    // Assert
    expect(sendsPerMinute(w, start)).toEqual([100, 100]);
  });

  it("ends the wave when nothing is in flight or due, so the next one starts slow again", async () => {
    // Arrange
    const w = renewalWorld({ ratePerMinute: 100, slowStart: { startRate: 5, increase: 2, successesPerStep: 5 } });
    await fleet(w, "first", 20, 3 * HOUR_MS);
    await runMinutes(w, 15);
    const idle = (await w.store.read(SITE)).state.wave;

    // Act: a second batch comes due a day later.
    await w.advance(DAY_MS);
    await fleet(w, "second", 20, 3 * HOUR_MS);
    const start = w.clock.now();
    await runMinutes(w, 1);

    // Assert
    expect(idle).toBeUndefined();
    expect(sendsPerMinute(w, start).at(-1)).toBe(5);
  });
});

describe("the abort rule", () => {
  it("pauses renewal with the reason once 25% of at least 40 first attempts failed, not before the sample, and resume starts a new wave", async () => {
    // Arrange: 30% of 400 due hosts refuse; the breaker is out of the way (more than 1,000 of 20 can never fail).
    const w = renewalWorld({ ratePerMinute: 10, maxInFlight: 500, failureThreshold: 1_000, abort: { percentage: 25, minAttempts: 40 } });
    const hosts = await fleet(w, "db", 400, 3 * HOUR_MS);
    hosts.forEach((identity, index) => index % 10 < 3 && w.refusing.set(identity, "Incorrect provision token supplied"));
    let pausedBefore40 = false;

    // Act
    for (let minute = 0; minute < 30; minute++) {
      const result = await w.run();
      const wave = (await w.store.read(SITE)).state.wave;
      if (result.status === "paused" && (wave?.attempts ?? 0) < 40) pausedBefore40 = true;
      if (result.status === "paused") break;
      await w.advance(MINUTE_MS);
    }
    const { state } = await w.store.read(SITE);
    const sentWhenPaused = [...w.nodes.values()].reduce((sum, node) => sum + node.reprovisionedAt.length, 0);
    const operator = new RenewalOperator({ site: SITE, operator: { currentTerm: async () => TERM }, registry: w.registry, store: w.store, clock: w.clock });
    const resumed = await operator.resume();

    // Assert
    expect(pausedBefore40).toBe(false);
    expect(state.paused?.reason).toMatch(
      /^aborted: \d+ of the \d+ hosts tried in this renewal wave failed \(\d+(\.\d)?%; \d+(\.\d)?% were all \d+ in flight renewed\), at or above renew\.abort_percentage 25 once renew\.abort_min_attempts 40 were tried; last: db-\d{4}\.example\.net: Incorrect provision token supplied \(status 1\)$/,
    );
    expect(state.wave?.attempts).toBeGreaterThanOrEqual(40);
    expect(sentWhenPaused).toBeLessThan(100);
    expect(w.metrics.lastGauge(EXTRA_METRIC.renewalPaused)).toBe(1);
    expect(resumed).toMatchObject({ resumed: true, reason: expect.stringMatching(/^aborted: /) });
    expect((await w.store.read(SITE)).state.wave).toBeUndefined();
  });

  it("does not count a retried host twice: one host refusing over and over is one failed attempt", async () => {
    // Arrange: one of 10 hosts refuses and is retried (30 s, 1 m, 2 m ...); counted again, its second failure would trip the rule.
    const w = renewalWorld({ ratePerMinute: 1, failureThreshold: 1_000, abort: { percentage: 30, minAttempts: 5 } });
    const hosts = await fleet(w, "app", 10, 3 * HOUR_MS);
    w.refusing.set(hosts[0] as string, "denied by policy");

    // Act
    await runMinutes(w, 30);
    const { state } = await w.store.read(SITE);

    // Assert
    expect(w.nodes.get(hosts[0] as string)?.reprovisionedAt.length ?? 0).toBe(0);
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBeGreaterThan(3);
    expect(state.paused).toBeUndefined();
    expect(state.wave).toMatchObject({ attempts: 10, failures: 1 });
  });
});

describe("maintenance windows and freezes", () => {
  it("holds due hosts until the window opens, and sends at once those that would expire before it, logged and counted", async () => {
    // Arrange: the world starts at 00:00 UTC; the window is 04:00-05:00 daily. 10 hosts expire at
    // 03:00 (they cannot wait for 04:00), 10 at 05:30 (due from before 02:30, they can).
    const calendar = new RenewCalendar([entry("0 4 * * *", HOUR_MS)], []);
    const w = renewalWorld({ ratePerMinute: 100, calendar });
    const start = w.clock.now();
    const early = await fleet(w, "early", 10, 3 * HOUR_MS);
    const later = await fleet(w, "later", 10, 5.5 * HOUR_MS);

    // Act
    await runMinutes(w, 5 * 60);

    // Assert, at the nodes.
    for (const identity of early) expect(w.nodes.get(identity)?.reprovisionedAt).toEqual([start]);
    for (const identity of later) {
      const sent = w.nodes.get(identity)?.reprovisionedAt ?? [];
      expect(sent, identity).toHaveLength(1);
      expect(calendar.allowedAt(sent[0] as number), identity).toBe(true);
    }
    expect(w.metrics.total(EXTRA_METRIC.renewalsOutsideWindow)).toBe(10);
    const warnings = w.logger.at("warn").filter((record) => record.message.startsWith("renewed outside the maintenance windows"));
    expect(warnings.map((record) => record.attributes?.identity).sort()).toEqual(early);
  });

  it("sends in the window the hosts whose place comes after it closes, when the next one would be too late", async () => {
    // Arrange: the window is 01:00-02:00 daily; 50 hosts expire at 08:00 with a 10 h renewal window,
    // placed by name between 22:00 and 03:00: after 02:00 the next window (tomorrow) is past their expiry.
    const calendar = new RenewCalendar([entry("0 1 * * *", HOUR_MS)], []);
    const w = renewalWorld({ ratePerMinute: 100, calendar, before: { ms: 10 * HOUR_MS } });
    const hosts = await fleet(w, "batch", 50, 8 * HOUR_MS);
    const start = w.clock.now();

    // Act
    await runMinutes(w, 4 * 60);

    // Assert: every one sent once, all at the window's first run.
    for (const identity of hosts) expect(w.nodes.get(identity)?.reprovisionedAt, identity).toEqual([start + HOUR_MS]);
    expect(w.metrics.total(EXTRA_METRIC.renewalsOutsideWindow)).toBe(0);
  });

  it("shows in status whether the windows are open and the next allowed moment", async () => {
    // Arrange: 00:00 UTC, the window opens at 04:00.
    const calendar = new RenewCalendar([entry("0 4 * * *", HOUR_MS)], []);
    const w = renewalWorld({ calendar });
    const queue = () => new InMemoryQueue();
    const renew = { before: w.settings.before, ratePerMinute: 10, maxInFlight: 50, timeoutMs: 15 * MINUTE_MS, calendar };
    const deps = { site: SITE, deploymentId: "east", leaderElection: false, registry: w.registry, renewalStore: w.store, clock: w.clock };

    // Act
    const closed = await status({ ...deps, queues: { hostWork: queue(), hostWorkDlq: queue(), lifecycle: queue(), lifecycleDlq: queue() }, renew });
    await w.advance(4 * HOUR_MS);
    const open = await status({ ...deps, queues: { hostWork: queue(), hostWorkDlq: queue(), lifecycle: queue(), lifecycleDlq: queue() }, renew });

    // Assert
    expect(closed.renewal.windows).toEqual({ open: false, nextAllowedAt: Date.UTC(2026, 5, 1, 4) });
    expect(open.renewal.windows).toEqual({ open: true });
    expect(formatRenewalReport(closed.renewal, w.clock.now())).toContain("renewal windows: CLOSED (outside the windows or in a freeze); next allowed 2026-06-01T04:00:00");
  });

  it("sends nothing in a freeze inside a window but what would expire first", async () => {
    // Arrange: a window all day, frozen 00:00-06:00; hosts expire at 05:00 and 12:00 (all due by 05:30).
    const calendar = new RenewCalendar([entry("0 0 * * *", DAY_MS)], [entry("0 0 * * *", 6 * HOUR_MS)]);
    const w = renewalWorld({ ratePerMinute: 100, calendar, before: { ms: 13 * HOUR_MS } });
    const start = w.clock.now();
    const soon = await fleet(w, "soon", 5, 5 * HOUR_MS);
    const noon = await fleet(w, "noon", 5, 12 * HOUR_MS);

    // Act
    await runMinutes(w, 7 * 60);

    // Assert
    for (const identity of soon) expect(w.nodes.get(identity)?.reprovisionedAt, identity).toEqual([start]);
    for (const identity of noon) expect(w.nodes.get(identity)?.reprovisionedAt, identity).toEqual([start + 6 * HOUR_MS]);
  });
});
