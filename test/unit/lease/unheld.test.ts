/**
 * The signal behind the "no deployment holds the lease" alarm: a lease round (or a paused
 * deployment's read) reports 1 when the stored lease has had no valid holder for longer than a
 * takeover takes, and 0 otherwise.
 */
import { describe, expect, it } from "vitest";
import { createLeaseGate } from "../../../lib/lease/gate";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { MemoryPauseStore } from "../../support/stores/memory-pause-store";
import type { PauseStore } from "../../../lib/ports/pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";

const SITE = "eu";
const RPC_TTL_MS = 60_000;
const settingsFor = (deploymentId: string) => resolveLeaseSettings({ leaderElection: true, site: SITE, deploymentId, deliveryHorizonMs: RPC_TTL_MS });
const { leaseDurationMs, skewBoundMs, keepIntervalMs } = settingsFor("any");
/** The documented slack before an unheld lease is an outage: one lease-keeper run (a minute) late or missed. */
const TAKEOVER_MARGIN_MS = 60_000;
/** From the holder's last renewal: lease duration + skew + rpc_ttl + one renew interval + the margin. */
const TAKEOVER_BOUND_MS = leaseDurationMs + skewBoundMs + RPC_TTL_MS + keepIntervalMs + TAKEOVER_MARGIN_MS;

function setup() {
  const time = new VirtualClock();
  const store = new MemoryLeaseStore();
  const pause = new MemoryPauseStore();
  const gateOf = (deploymentId: string, metrics = new RecordingMetrics(), logger = new RecordingLogger(), pauseStore: PauseStore = pause) =>
    createLeaseGate(settingsFor(deploymentId), { store, pause: pauseStore, metrics, logger, clock: time.skewed() });
  const switchTo = (deploymentId: string, paused: boolean) => pause.write({ site: SITE, deploymentId, paused, changedAt: time.trueTime });
  return { time, store, gateOf, switchTo };
}

describe("the no-holder signal of the lease round", () => {
  it("says so when the round finds the lease expired for longer than a takeover takes, and clears once the round took it over", async () => {
    const { time, store, gateOf } = setup();
    await gateOf("primary").acquireOrKeep();
    time.advance(TAKEOVER_BOUND_MS + 1_000);
    const metrics = new RecordingMetrics();
    const logger = new RecordingLogger();

    const outcome = await gateOf("standby", metrics, logger).acquireOrKeep();

    expect(outcome).toMatchObject({ holding: true, term: 2 });
    expect(store.snapshot(SITE)?.holder).toBe("standby");
    expect(metrics.values(EXTRA_METRIC.leaseUnheld)).toEqual([1, 0]);
    const logged = logger.at("error").find((record) => record.message.startsWith("no deployment holds this site's lease"));
    expect(logged?.attributes).toMatchObject({ site: SITE, lastHolder: "primary", term: 1, released: false });
    expect(logged?.attributes?.unheldForSeconds).toBe(Math.round((TAKEOVER_BOUND_MS + 1_000 - leaseDurationMs) / 1000));
  });

  it("does not say so while a deployment holds the lease, nor during an ordinary takeover", async () => {
    const { time, gateOf } = setup();
    await gateOf("primary").acquireOrKeep();
    const metrics = new RecordingMetrics();
    const standby = gateOf("standby", metrics);

    const whileHeld = await standby.acquireOrKeep();
    time.advance(TAKEOVER_BOUND_MS - 1_000);
    const takeover = await standby.acquireOrKeep();

    expect(whileHeld.holding).toBe(false);
    expect(takeover).toMatchObject({ holding: true, term: 2 });
    expect(metrics.values(EXTRA_METRIC.leaseUnheld)).toEqual([0, 0, 0]);
  });

  it("is reported by a paused deployment when every deployment is paused, for an expired and for a released lease", async () => {
    const { time, gateOf, switchTo } = setup();
    const leader = gateOf("primary");
    await leader.acquireOrKeep();
    await leader.release();
    await switchTo("primary", true);
    await switchTo("standby", true);
    const metrics = new RecordingMetrics();
    const standby = gateOf("standby", metrics);

    await standby.acquireOrKeep();
    time.advance(TAKEOVER_BOUND_MS + 1_000);
    const paused = await standby.acquireOrKeep();

    expect(paused.holding).toBe(false);
    expect(metrics.values(EXTRA_METRIC.leaseUnheld)).toEqual([0, 1]);
  });

  it("reports nothing when the paused deployment cannot read the lease, and counts the store error", async () => {
    const { time, store, gateOf, switchTo } = setup();
    await gateOf("primary").acquireOrKeep();
    await switchTo("standby", true);
    time.advance(TAKEOVER_BOUND_MS + 1_000);
    store.read = () => Promise.reject(new Error("connect ECONNREFUSED"));
    const metrics = new RecordingMetrics();

    const outcome = await gateOf("standby", metrics).acquireOrKeep();

    expect(outcome.holding).toBe(false);
    expect(metrics.values(EXTRA_METRIC.leaseUnheld)).toEqual([]);
    expect(metrics.values(EXTRA_METRIC.leaseStoreErrors)).toEqual([1]);
  });
});
