/**
 * The keeper's run and its ticks in the seeded simulation (test/support/sim): the keeper runs one
 * lease round a minute and arms the minute's ticks on the lifecycle queue; the ticks keep the lease
 * between its runs and take the startup events. Lost, late and duplicated ticks, and killed tick
 * invocations, must cost at most the rest of the minute: the next keeper run arms ticks again.
 */
import { describe, expect, it } from "vitest";
import { LEASE_TIMING, type DeploymentSpec } from "../support/sim/deployment";
import type { FaultRates } from "../support/sim/faults";
import type { AppliedLeaseWrite } from "../support/sim/lease-history";
import { FAULT_PHASE_MS, runScenario, type Scenario, type SimEvent } from "../support/sim/world";

const NODES = 6;
const NO_FAULTS: FaultRates = {
  ...{ storeDelay: 0, storeRequestLost: 0, storeAnswerLost: 0, rpcRequestHeld: 0, rpcReplyLost: 0, sqsDuplicate: 0, sqsSendAmbiguous: 0 },
  ...{ helperFailure: 0, helperDefer: 0, helperLate: 0, tickLost: 0, tickLate: 0 },
};
/** The keeper's schedule: whatever the ticks lost, its next run writes the lease and arms them again. */
const KEEPER_RATE_MS = 60_000;
/** A lease round's store calls on the simulated network without store faults (two calls, 40 ms each way at most). */
const ROUND_MS = 200;

function deployments(): DeploymentSpec[] {
  return ["d0", "d1"].map((id) => ({ id, wallSkewMs: 0, rpcTtlSeconds: 30, workers: 2, intervalMs: 60_000 }));
}

function scenario(seed: number, rates: Partial<FaultRates>, events: SimEvent[] = []): Scenario {
  return { seed, deployments: deployments(), nodes: NODES, rates: { ...NO_FAULTS, ...rates }, events };
}

/** The longest time between two writes the lease table applied, from the first to the end of `until`. */
function longestGap(writes: readonly AppliedLeaseWrite[], until: number): number {
  const times = writes.filter((write) => write.at <= until).map((write) => write.at);
  return Math.max(...times.slice(1).map((at, index) => at - times[index]!));
}

describe("ticks armed by the keeper, simulated", () => {
  it("keep one deployment's lease between the keeper's runs and take every startup event, on a quiet site", async () => {
    const report = await runScenario(scenario(11, {}));

    expect(report.violations).toEqual([]);
    // One term for the whole run: the lease never lapsed between two keeper runs.
    expect(report.leaseWrites.filter((write) => write.kind === "claim")).toHaveLength(1);
    expect(longestGap(report.leaseWrites, Infinity)).toBeLessThan(LEASE_TIMING.leaseDurationMs);
    // The writes come from the ticks, every renew_interval, not once a minute from the keeper alone.
    expect(report.leaseWrites.length).toBeGreaterThan((70 * 60_000) / KEEPER_RATE_MS * 2);
    expect(report.eventsTaken).toBeGreaterThanOrEqual(NODES);
    expect(report.provisioned).toBeGreaterThanOrEqual(NODES);
  });

  it.each([1, 2, 3, 4])("restart within a keeper period after lost, late and duplicated ticks (seed %i)", async (seed) => {
    const report = await runScenario(scenario(seed, { tickLost: 0.5, tickLate: 0.3, sqsDuplicate: 0.3 }));

    expect(report.violations).toEqual([]);
    expect(report.hits.get("tick-lost") ?? 0).toBeGreaterThan(0);
    expect(report.hits.get("tick-late") ?? 0).toBeGreaterThan(0);
    // Every minute at least the keeper's round writes the lease (the holder's keep, or a standby's claim).
    expect(longestGap(report.leaseWrites, FAULT_PHASE_MS)).toBeLessThanOrEqual(KEEPER_RATE_MS + ROUND_MS);
    expect(report.provisioned).toBeGreaterThanOrEqual(NODES);
  });

  it("restart within a keeper period after tick invocations are killed mid-run", async () => {
    // Crashes of the lifecycle function, each striking the next tick (or queued batch) it runs.
    const events: SimEvent[] = Array.from({ length: 30 }, (_, index) => ({ at: index * 60_000 + 7_000, kind: "crash", deployment: index % 2, fn: "lifecycle" }));
    const report = await runScenario(scenario(7, { tickLost: 0.2 }, events));

    expect(report.violations).toEqual([]);
    expect(report.hits.get("container-crash") ?? 0).toBeGreaterThan(10);
    expect(longestGap(report.leaseWrites, FAULT_PHASE_MS)).toBeLessThanOrEqual(KEEPER_RATE_MS + ROUND_MS);
    expect(report.provisioned).toBeGreaterThanOrEqual(NODES);
  });
});
