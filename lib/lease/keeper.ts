/**
 * The loop of the `lease-keeper` function. EventBridge fires at most once a minute, which is too
 * slow for a 30 s lease, so each scheduled invocation stays up for most of the minute and keeps
 * the lease (leader) or contests it (standby) every `intervalMs`, stopping before its own Lambda deadline. The
 * next scheduled invocation picks up where it left off; the gap between them is far shorter than
 * the lease's validity. See docs/lease.md.
 */
import { silentLogger, type Logger } from "../ports/logger";
import type { Clock } from "../ports/clock";
import type { LeaseOutcome } from "../ports/lease-gate";

export interface LeaseKeeperOptions {
  /** A Lease or a LeaseGate; a LeaseGate also keeps the paused gauge and its own onWon. */
  lease: { acquireOrKeep(remainingMs?: () => number): Promise<LeaseOutcome> };
  clock: Clock;
  /** Monotonic ms (on `clock`) by which the loop must have returned, e.g. now + remaining time - margin. */
  until: number;
  intervalMs: number;
  /** Called when a round wins a new term. */
  onWon?: (term: number) => void | Promise<void>;
  /** Aborting stops the loop at the next boundary (graceful stop, tests). */
  signal?: AbortSignal;
  logger?: Logger;
  /** Time one round may take; no round starts later than `until - roundBudgetMs`. Default 2 s. */
  roundBudgetMs?: number;
}

export interface LeaseKeeperSummary {
  rounds: number;
  heldRounds: number;
  failedRounds: number;
  /** Terms won during this run, in order. */
  wonTerms: number[];
}

export async function runLeaseKeeper(options: LeaseKeeperOptions): Promise<LeaseKeeperSummary> {
  const { lease, clock, until, intervalMs, onWon, signal } = options;
  const logger = options.logger ?? silentLogger;
  const roundBudgetMs = options.roundBudgetMs ?? 2_000;
  const summary: LeaseKeeperSummary = { rounds: 0, heldRounds: 0, failedRounds: 0, wonTerms: [] };
  // A round that overran its slot is not made up for: the next one starts at once, then the cadence resumes.
  for (let roundAt = clock.monotonic(); !signal?.aborted; roundAt = Math.max(roundAt + intervalMs, clock.monotonic())) {
    if (roundAt + roundBudgetMs > until) break;
    const wait = roundAt - clock.monotonic();
    if (wait > 0) await clock.sleep(wait);
    if (signal?.aborted) break;
    summary.rounds++;
    try {
      // A term won here is announced inside this round: its discovery has the keeper's time left.
      const outcome = await lease.acquireOrKeep(() => until - clock.monotonic());
      if (outcome.holding) {
        summary.heldRounds++;
        if (outcome.wonNewTerm) {
          summary.wonTerms.push(outcome.term);
          await onWon?.(outcome.term);
        }
      }
    } catch (error) {
      // The lease already logged and counted the store failure; the next round tries again.
      summary.failedRounds++;
      logger.debug("lease keeper round failed", { error });
    }
  }
  return summary;
}
