/**
 * Renewal under change control at scale, simulated (docs/renewal.md, "Change control"): 100,000
 * provisioned hosts renewed by the real Renewal use case (in-memory stores, a virtual clock, nodes
 * that come back with new credentials 3 minutes after reprovision). Each node records every request
 * it ran and when it was back; the test judges each send's time against the calendar, so "in a
 * window, or under the fallback" and "none expired" are counted where the effect lands.
 */
import { describe, expect, it } from "vitest";
import { parseCron } from "../../lib/config/cron";
import { RenewCalendar, type CalendarEntry } from "../../lib/config/renew-calendar";
import { EXTRA_METRIC } from "../../lib/ports/metric-names";
import { renewalReport } from "../../lib/app/renewal-state";
import { HOUR_MS, MINUTE_MS, renewalWorld, SITE, type RenewalWorld } from "../support/renewal";

const FLEET = 100_000;
const DAY_MS = 24 * HOUR_MS;

function entry(cron: string, durationMs: number): CalendarEntry {
  const parsed = parseCron(cron);
  if (!("schedule" in parsed)) throw new Error(parsed.problems.join("; "));
  return { cron: parsed.schedule, timezone: "UTC", durationMs, duration: `${durationMs / MINUTE_MS}m` };
}

/** The fleet, expiring over one hour from `expiresFrom`; returns each host's expiry. */
async function provisionFleet(w: RenewalWorld, expiresFrom: number): Promise<Map<string, number>> {
  const expiry = new Map<string, number>();
  for (let index = 0; index < FLEET; index++) {
    const identity = `node-${String(index).padStart(6, "0")}.example.net`;
    const expiresAt = expiresFrom + Math.floor((index / FLEET) * HOUR_MS);
    expiry.set(identity, expiresAt);
    await w.provision(identity, expiresAt, 30 * DAY_MS);
  }
  return expiry;
}

/** Requests the nodes ran in each minute from `start`. */
function sendsPerMinute(w: RenewalWorld, start: number): Map<number, number> {
  const perMinute = new Map<number, number>();
  for (const node of w.nodes.values()) {
    for (const at of node.reprovisionedAt) {
      const minute = Math.floor((at - start) / MINUTE_MS);
      perMinute.set(minute, (perMinute.get(minute) ?? 0) + 1);
    }
  }
  return perMinute;
}

describe(`renewal of ${FLEET.toLocaleString("en")} hosts under change control`, () => {
  it("ramps from the start rate to renew.rate inside the window, and no credential expires or is renewed outside a window but under the fallback", { timeout: 900_000 }, async () => {
    // Arrange: 00:00 UTC; the window is 01:00-05:00 daily; credentials expire from 16:00 to 17:00 with a
    // 22 h renewal window (the 20 h closed between windows is shorter: check-config accepts it). The
    // next window (tomorrow 01:00) is past every expiry, so the whole fleet goes in this one: 240
    // minutes at 500 a minute, after a slow start from 10. 200 nodes take the request and never
    // come back until the window has closed: their retries after it are the fallback's.
    const calendar = new RenewCalendar([entry("0 1 * * *", 4 * HOUR_MS)], []);
    const w = renewalWorld({
      before: { ms: 22 * HOUR_MS },
      ratePerMinute: 500,
      maxInFlight: 3_000,
      failureThreshold: FLEET,
      calendar,
      slowStart: { startRate: 10, increase: 2, successesPerStep: 50 },
    });
    const start = w.clock.now();
    const expiry = await provisionFleet(w, start + 16 * HOUR_MS);
    const silent = [...expiry.keys()].filter((_, index) => index % 500 === 7);
    for (const identity of silent) w.lost.add(identity);

    // Act: the schedule runs once a minute until every node is back.
    const allBack = () => [...w.nodes.values()].every((node) => node.backAt.length > 0);
    const began = performance.now();
    // Before the window the runs send nothing (checked at the nodes below); every 10 minutes is enough to show it.
    while (w.clock.now() < start + HOUR_MS) {
      await w.run();
      await w.advance(10 * MINUTE_MS);
    }
    while (w.clock.now() < start + 16 * HOUR_MS && !allBack()) {
      if (w.clock.now() >= start + 5 * HOUR_MS) w.lost.clear();
      await w.run();
      await w.advance(MINUTE_MS);
    }
    await w.run();
    const seconds = (performance.now() - began) / 1_000;

    // Assert, from what the nodes recorded.
    let expired = 0;
    let beforeItsWindow = 0;
    const outsideWindow = new Set<string>();
    for (const [identity, node] of w.nodes) {
      const expiresAt = expiry.get(identity) as number;
      if (!(node.backAt.at(-1)! < expiresAt)) expired++;
      for (const at of node.reprovisionedAt) {
        if (at < expiresAt - 22 * HOUR_MS) beforeItsWindow++;
        if (!calendar.allowedAt(at)) outsideWindow.add(identity);
      }
    }
    const outsideSends = [...w.nodes.values()].reduce((sum, node) => sum + node.reprovisionedAt.filter((at) => !calendar.allowedAt(at)).length, 0);
    expect({ expired, beforeItsWindow }).toEqual({ expired: 0, beforeItsWindow: 0 });
    // Every send outside the window was the fallback's (counted and logged), and only for the nodes that were away.
    expect(outsideSends).toBe(w.metrics.total(EXTRA_METRIC.renewalsOutsideWindow));
    expect(outsideSends).toBeGreaterThan(0);
    expect([...outsideWindow].every((identity) => silent.includes(identity))).toBe(true);
    // The ramp: the first run sent the start rate, and the window reached renew.rate, never above it.
    const perMinute = sendsPerMinute(w, start);
    expect(perMinute.get(60)).toBe(10);
    expect(Math.max(...perMinute.values())).toBe(500);
    expect(w.metrics.values(EXTRA_METRIC.renewalRate)).toContain(500);
    expect([...perMinute.keys()].filter((minute) => minute < 60)).toEqual([]);
    expect(w.metrics.total(EXTRA_METRIC.renewalsCompleted)).toBeGreaterThanOrEqual(FLEET);
    console.log(`change-control simulation: ${FLEET} hosts, ${outsideSends} fallback sends, ${seconds.toFixed(1)} s`);
  });

  it("aborts on an injected 30% failure once the minimum sample is tried, with the reason, and sends nothing more", { timeout: 900_000 }, async () => {
    // Arrange: the whole fleet due now; 30% of the nodes refuse reprovision; abort at 20% after 500
    // first attempts; the breaker out of the way.
    const w = renewalWorld({
      before: { ms: 6 * HOUR_MS },
      ratePerMinute: 200,
      maxInFlight: 2_000,
      failureThreshold: FLEET,
      slowStart: { startRate: 20, increase: 2, successesPerStep: 50 },
      abort: { percentage: 20, minAttempts: 500 },
    });
    const start = w.clock.now();
    const expiry = await provisionFleet(w, start + 3 * HOUR_MS);
    [...expiry.keys()].forEach((identity, index) => index % 10 < 3 && w.refusing.set(identity, "Incorrect provision token supplied"));

    // Act
    let paused: { reason: string; at: number } | undefined;
    let attemptsBefore = 0;
    while (w.clock.now() < start + 2 * HOUR_MS && !paused) {
      attemptsBefore = (await w.store.read(SITE)).state.wave?.attempts ?? 0;
      const result = await w.run();
      if (result.status === "paused") paused = (await w.store.read(SITE)).state.paused;
      await w.advance(MINUTE_MS);
    }
    const refusedAtPause = w.metrics.total(EXTRA_METRIC.renewalFailures);
    const sentAtPause = [...w.nodes.values()].reduce((sum, node) => sum + node.reprovisionedAt.length, 0);
    for (let minute = 0; minute < 30; minute++) {
      await w.run();
      await w.advance(MINUTE_MS);
    }
    const { state } = await w.store.read(SITE);
    const report = renewalReport(await w.registry.expiries(), state, SITE, w.clock.now());

    // Assert: paused at the first run whose sample reached 500, with the share and the last host's reason.
    expect(paused?.reason).toMatch(
      /^aborted: \d+ of the \d+ hosts tried in this renewal wave failed \(\d+(\.\d)?%; [23]\d(\.\d)?% were all \d+ in flight renewed\), at or above renew\.abort_percentage 20 once renew\.abort_min_attempts 500 were tried; last: node-\d{6}\.example\.net: Incorrect provision token supplied \(status 1\)$/,
    );
    expect(attemptsBefore).toBeLessThan(500);
    expect(state.wave?.attempts).toBeGreaterThanOrEqual(500);
    expect(report.paused?.reason).toBe(paused?.reason);
    expect(w.metrics.lastGauge(EXTRA_METRIC.renewalPaused)).toBe(1);
    // Nothing left after the pause: the fleet was far from done.
    expect(sentAtPause).toBeLessThan(FLEET / 10);
    expect([...w.nodes.values()].reduce((sum, node) => sum + node.reprovisionedAt.length, 0)).toBe(sentAtPause);
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBe(refusedAtPause);
  });
});
