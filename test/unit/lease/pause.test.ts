import { describe, expect, it } from "vitest";
import { LeaseStoreError, PausedError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { MemoryPauseStore } from "../../support/stores/memory-pause-store";
import type { PauseStore } from "../../../lib/ports/pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { METRIC } from "../../../lib/ports/metric-names";
import { RecordingMetrics, VirtualClock } from "../../support/fakes";

const SITE = "eu";
const settingsFor = (deploymentId: string) => resolveLeaseSettings({ leaderElection: true, site: SITE, deploymentId });

function setup() {
  const time = new VirtualClock();
  const store = new MemoryLeaseStore();
  const pause = new MemoryPauseStore();
  const metrics = new RecordingMetrics();
  const gateOf = (deploymentId: string, pauseStore: PauseStore = pause) =>
    createLeaseGate(settingsFor(deploymentId), { store, pause: pauseStore, metrics, clock: time.skewed() });
  const switchTo = (deploymentId: string, paused: boolean) => pause.write({ site: SITE, deploymentId, paused, changedAt: time.trueTime });
  return { time, store, metrics, gateOf, switchTo };
}

describe("the operator's pause switch", () => {
  it("closes the gate of a paused leader at its next round and stops it keeping the lease, so the lease runs out", async () => {
    const { time, store, metrics, gateOf, switchTo } = setup();
    const leader = gateOf("primary");
    const term = await leader.currentTerm();
    const expiresAt = store.snapshot(SITE)?.expiresAt;

    await switchTo("primary", true);
    const outcome = await leader.acquireOrKeep();
    time.advance(30_000);

    expect(term).toBe(1);
    expect(outcome).toEqual({ holding: false, current: undefined });
    expect(await leader.currentTerm()).toBeUndefined();
    await expect(leader.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
    expect(store.snapshot(SITE)?.expiresAt).toBe(expiresAt);
    expect(metrics.lastGauge(METRIC.paused)).toBe(1);
  });

  it("keeps a paused standby from contesting, and lets the other deployment take the expired lease", async () => {
    const { time, store, gateOf, switchTo } = setup();
    await gateOf("primary").currentTerm();
    await switchTo("primary", true);
    await switchTo("standby", true);
    time.advance(40_000);

    const pausedStandby = await gateOf("standby").acquireOrKeep();
    await switchTo("standby", false);
    const standby = await gateOf("standby").acquireOrKeep();

    expect(pausedStandby.holding).toBe(false);
    expect(standby).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
    expect(store.snapshot(SITE)?.holder).toBe("standby");
  });

  it("works again after resume, under the lease it still holds or a new term", async () => {
    const { gateOf, switchTo } = setup();
    const leader = gateOf("primary");
    await leader.currentTerm();
    await switchTo("primary", true);
    await leader.acquireOrKeep();

    await switchTo("primary", false);

    expect(await leader.currentTerm()).toBe(1);
  });

  it("reads closed when the switch cannot be read", async () => {
    const { gateOf } = setup();
    const broken: PauseStore = {
      read: () => Promise.reject(new Error("throttled")),
      write: () => Promise.reject(new Error("unused")),
      list: () => Promise.reject(new Error("unused")),
    };
    const gate = gateOf("primary", broken);

    await expect(gate.acquireOrKeep()).rejects.toBeInstanceOf(LeaseStoreError);
    expect(await gate.currentTerm()).toBeUndefined();
  });
});
