/**
 * Randomized interleavings of 2-5 deployments (some with several concurrent invocations and a
 * deployment keeping its lease at every tick) contending for one lease through a simulated network: delayed, lost and
 * response-dropped writes, wall clocks skewed up to the bound, crashes and releases. Time is
 * virtual and every choice comes from a seeded PRNG, so each seed replays exactly.
 *
 * The safety properties, in true time:
 * - no two deployments ever have open gates at overlapping instants (an open gate covers the
 *   attempt it admitted, which may run until that attempt's timeout);
 * - every attempt under an older term is over before the first attempt under a newer term starts;
 * - each term belongs to one deployment and terms are taken in strictly increasing order.
 */
import { describe, expect, it } from "vitest";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { ConditionalWrite, LeaseItem, LeaseStore } from "../../../lib/ports/lease-store";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import type { Clock } from "../../../lib/ports/clock";
import { noMetrics } from "../../support/fakes";
import { keepLeaseByTicks } from "../../support/lease-rounds";
import { seededRandom } from "../../support/random";

const SITE = "sim";

/** Virtual true time: timers fire in order, and all code they wake runs before the next fires. */
class Simulation {
  trueTime = 0;
  private sequence = 0;
  private readonly timers: Array<{ at: number; sequence: number; fire: () => void }> = [];

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = { at: this.trueTime + Math.max(0, ms), sequence: this.sequence++, fire: resolve };
      let index = this.timers.length;
      while (index > 0 && (this.timers[index - 1]!.at > timer.at)) index--;
      this.timers.splice(index, 0, timer);
    });
  }

  clock(wallOffsetMs: number, monotonicOffsetMs: number): Clock {
    return {
      now: () => this.trueTime + wallOffsetMs,
      monotonic: () => this.trueTime + monotonicOffsetMs,
      sleep: (ms) => this.sleep(ms),
    };
  }

  async run(endTime: number): Promise<void> {
    await settle();
    for (let timer = this.timers.shift(); timer && timer.at <= endTime; timer = this.timers.shift()) {
      this.trueTime = timer.at;
      timer.fire();
      await settle();
    }
  }
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The in-memory store behind a network that delays, loses requests, and loses responses after applying. */
class FlakyNetworkStore implements LeaseStore {
  constructor(
    private readonly store: MemoryLeaseStore,
    private readonly sim: Simulation,
    private readonly random: () => number,
    private readonly claims: Array<{ term: number; holder: string; at: number }>,
  ) {}

  claim: LeaseStore["claim"] = (request) =>
    this.roundTrip(() => {
      const result = this.store.applyClaim(request);
      if (result.applied) this.claims.push({ term: result.item.term, holder: result.item.holder, at: this.sim.trueTime });
      return result;
    });
  extend: LeaseStore["extend"] = (request) => this.roundTrip(() => this.store.applyExtend(request));
  release: LeaseStore["release"] = (request) => this.roundTrip(() => this.store.applyRelease(request));
  markAnnounced: LeaseStore["markAnnounced"] = (request) => this.roundTrip(() => this.store.applyMarkAnnounced(request));
  recordPeer: LeaseStore["recordPeer"] = async (request) => {
    await this.roundTrip(() => {
      this.store.applyRecordPeer(request);
      return undefined;
    });
  };
  read: LeaseStore["read"] = (site) => this.roundTrip(() => this.store.snapshot(site));

  private delay(): number {
    const roll = this.random();
    if (roll < 0.8) return this.random() * 200;
    if (roll < 0.95) return 200 + this.random() * 3_000;
    return 3_000 + this.random() * 20_000;
  }

  private async roundTrip<T extends ConditionalWrite | LeaseItem | undefined>(apply: () => T): Promise<T> {
    await this.sim.sleep(this.delay());
    if (this.random() < 0.04) throw new Error("request lost");
    const result = apply();
    await this.sim.sleep(this.delay());
    if (this.random() < 0.05) throw new Error("response lost");
    return result;
  }
}

interface OpenAttempt {
  deployment: string;
  term: number;
  start: number;
  end: number;
}

interface Scenario {
  seed: number;
  /** The bound the lease is configured with; clocks are always spread up to `actualSkewMs`. */
  configuredSkewMs: number;
  actualSkewMs: number;
}

async function simulate({ seed, configuredSkewMs, actualSkewMs }: Scenario) {
  const random = seededRandom(seed);
  const sim = new Simulation();
  const claims: Array<{ term: number; holder: string; at: number }> = [];
  const store = new FlakyNetworkStore(new MemoryLeaseStore(), sim, random, claims);
  const attempts: OpenAttempt[] = [];
  const endTime = 240_000;
  const deployments = 2 + Math.floor(random() * 4);
  const profiles = [
    { leaseDurationMs: 30_000, keepIntervalMs: 10_000 },
    { leaseDurationMs: 10_000, keepIntervalMs: 3_000 },
  ] as const;
  const profile = profiles[Math.floor(random() * profiles.length)]!;
  const actors: Array<Promise<void>> = [];

  for (let index = 0; index < deployments; index++) {
    const deploymentId = `deployment-${index}`;
    const settings = resolveLeaseSettings({ leaderElection: true, site: SITE, deploymentId, ...profile, skewBoundMs: configuredSkewMs });
    const invocations = 1 + Math.floor(random() * 3);
    const gateFor = () => {
      // Each invocation may run on a different host, so each gets its own skewed wall clock.
      const clock = sim.clock((random() - 0.5) * actualSkewMs, random() * 1e6);
      return { clock, gate: createLeaseGate(settings, { store, metrics: noMetrics, clock }) };
    };
    const crashAt = random() < 0.4 ? random() * endTime : Number.POSITIVE_INFINITY;
    const releasesOnStop = invocations === 1 && random() < 0.5;

    const keeper = gateFor();
    actors.push(
      (async () => {
        await sim.sleep(random() * 5_000);
        await keepLeaseByTicks({ lease: keeper.gate, clock: keeper.clock, until: keeper.clock.monotonic() + crashAt, intervalMs: settings.keepIntervalMs });
      })(),
    );

    for (let invocation = 0; invocation < invocations; invocation++) {
      const { gate } = gateFor();
      actors.push(
        (async () => {
          await sim.sleep(random() * 5_000);
          while (sim.trueTime < crashAt) {
            const term = await gate.currentTerm();
            for (let attempt = 0; term !== undefined && attempt < 1 + random() * 6; attempt++) {
              const timeout = 200 + random() * (settings.leaseDurationMs - configuredSkewMs - 200);
              try {
                await gate.assertOpen(term, timeout);
              } catch {
                break;
              }
              // An attempt may hang until its timeout (a silent node) or finish early.
              const duration = random() < 0.3 ? timeout : random() * timeout;
              attempts.push({ deployment: deploymentId, term, start: sim.trueTime, end: sim.trueTime + duration });
              await sim.sleep(duration);
            }
            await sim.sleep(random() * settings.keepIntervalMs * 1.5);
          }
          if (releasesOnStop) await gate.release();
        })(),
      );
    }
  }

  await sim.run(endTime);
  return { attempts, claims, violations: findViolations(attempts, claims) };
}

function findViolations(attempts: OpenAttempt[], claims: Array<{ term: number; holder: string }>): string[] {
  const violations: string[] = [];
  const ownerOfTerm = new Map<number, string>();
  claims.forEach((claim, index) => {
    if (index > 0 && claim.term <= claims[index - 1]!.term) violations.push(`term ${claim.term} claimed after term ${claims[index - 1]!.term}`);
    if (ownerOfTerm.has(claim.term)) violations.push(`term ${claim.term} claimed twice`);
    ownerOfTerm.set(claim.term, claim.holder);
  });
  for (const attempt of attempts) {
    if (ownerOfTerm.get(attempt.term) !== attempt.deployment) violations.push(`${attempt.deployment} acted under term ${attempt.term} it never claimed`);
  }
  const byStart = [...attempts].sort((a, b) => a.start - b.start);
  for (let i = 0; i < byStart.length; i++) {
    for (let j = i + 1; j < byStart.length && byStart[j]!.start < byStart[i]!.end; j++) {
      const [first, second] = [byStart[i]!, byStart[j]!];
      if (first.deployment !== second.deployment) {
        violations.push(`${first.deployment} (term ${first.term}) and ${second.deployment} (term ${second.term}) open at ${second.start}`);
      }
    }
  }
  for (const older of attempts) {
    for (const newer of attempts) {
      if (older.term < newer.term && older.end > newer.start) {
        violations.push(`term ${older.term} attempt ends at ${older.end}, after term ${newer.term} opened at ${newer.start}`);
      }
    }
  }
  return violations;
}

const SEEDS = Array.from({ length: 250 }, (_, index) => 1_000 + index);

describe("lease under randomized interleavings", () => {
  it("never opens two deployments' gates at once, with skew up to the bound", async () => {
    const runs = [];
    for (const seed of SEEDS) runs.push({ seed, ...(await simulate({ seed, configuredSkewMs: 5_000, actualSkewMs: 5_000 })) });

    const failures = runs.filter((run) => run.violations.length > 0).map((run) => ({ seed: run.seed, first: run.violations[0] }));
    expect(failures).toEqual([]);
    // The property must not hold vacuously: gates opened, and leadership moved between deployments.
    expect(runs.reduce((sum, run) => sum + run.attempts.length, 0)).toBeGreaterThan(SEEDS.length * 10);
    expect(runs.filter((run) => new Set(run.claims.map((claim) => claim.holder)).size > 1).length).toBeGreaterThan(SEEDS.length / 4);
  });

  it("does catch overlapping gates when clocks disagree by more than the configured bound", async () => {
    const runs = [];
    for (const seed of SEEDS.slice(0, 60)) runs.push(await simulate({ seed, configuredSkewMs: 0, actualSkewMs: 8_000 }));

    expect(runs.some((run) => run.violations.length > 0)).toBe(true);
  });
});
