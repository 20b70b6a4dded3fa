/**
 * A deployment keeping (or contesting) its lease every `intervalMs` the way the ticks do
 * (lib/app/ticks.ts), for tests that need one without the queue and the lifecycle function: the
 * keeper arms one tick per interval at fixed slots, and each tick is its own invocation that runs
 * one lease round. A tick taken up more than an interval past its slot (the round before it
 * overran) is stale and skipped, as Ticks.run skips it; nothing re-arms or makes up for it.
 */
import type { Clock } from "../../lib/ports/clock";
import type { LeaseGate } from "../../lib/ports/lease-gate";

export interface LeaseRoundsOptions {
  /** A Lease or a LeaseGate; with beginInvocation, each tick starts an invocation, as the lifecycle function does. */
  lease: Pick<LeaseGate, "acquireOrKeep"> & Partial<Pick<LeaseGate, "beginInvocation">>;
  clock: Clock;
  /** Monotonic ms (on `clock`) after which no tick comes: a crash, or the end of the armed ticks. */
  until: number;
  /** `lease.renew_interval`: the ticks are this far apart. */
  intervalMs: number;
  /** Called when a round wins a new term (after the gate's own onWon). */
  onWon?: (term: number) => void | Promise<void>;
  /** Time one round may take; no tick is due later than `until - roundBudgetMs`. Default 2 s. */
  roundBudgetMs?: number;
  /** Aborting stops the ticks at the next one (a deployment stopped, a test's end). */
  signal?: AbortSignal;
}

export interface LeaseRoundsSummary {
  rounds: number;
  heldRounds: number;
  failedRounds: number;
  /** Ticks skipped as past their slot. */
  staleTicks: number;
  /** Terms won, in order. */
  wonTerms: number[];
}

/** Runs the ticks from now until `until`; returns what their rounds established. */
export async function keepLeaseByTicks(options: LeaseRoundsOptions): Promise<LeaseRoundsSummary> {
  const { lease, clock, until, intervalMs, onWon, signal } = options;
  const roundBudgetMs = options.roundBudgetMs ?? 2_000;
  const summary: LeaseRoundsSummary = { rounds: 0, heldRounds: 0, failedRounds: 0, staleTicks: 0, wonTerms: [] };
  for (let dueAt = clock.monotonic(); dueAt + roundBudgetMs <= until && !signal?.aborted; dueAt += intervalMs) {
    const now = clock.monotonic();
    if (now > dueAt + intervalMs) {
      summary.staleTicks++;
      continue;
    }
    if (dueAt > now) await clock.sleep(dueAt - now);
    if (signal?.aborted) break;
    lease.beginInvocation?.();
    summary.rounds++;
    try {
      const outcome = await lease.acquireOrKeep(() => until - clock.monotonic());
      if (!outcome.holding) continue;
      summary.heldRounds++;
      if (outcome.wonNewTerm) {
        summary.wonTerms.push(outcome.term);
        await onWon?.(outcome.term);
      }
    } catch {
      // The lease logged and counted the store failure; the next tick tries again.
      summary.failedRounds++;
    }
  }
  return summary;
}
