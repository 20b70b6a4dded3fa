/**
 * The lease gate as its callers see it (lib/lease/gate.ts makes one): the PauseGate every RPC
 * attempt and helper run reads, the standing a batch is decided on, and the lease round.
 */
import type { LeaseItem } from "./lease-store";

/** What an open gate grants one attempt: it must be over, at the node too, by `endsBy`. */
export interface AttemptWindow {
  term: number;
  /** Wall-clock epoch ms of the gate check: the envelope `time` of the attempt's request. */
  stampedAt: number;
  /** Monotonic ms by which the attempt (sending, the node's handling, the reply) must be over; inside the lease validity. */
  endsBy: number;
}

/**
 * The pause gate (docs/behaviour.md §4). Resolves with the attempt's window when this deployment holds
 * lease term `term`, that term is still current, and the remaining validity covers an action
 * lasting `attemptTimeoutMs`; otherwise throws PausedError (or LeaseLostError), or
 * AttemptExceedsLeaseError when no validity could ever cover it. Read before every RPC attempt
 * and every helper run.
 */
export interface PauseGate {
  assertOpen(term: number, attemptTimeoutMs: number): Promise<AttemptWindow>;
}

/** Where this deployment stands right now, for decisions about a whole batch. */
export type Standing =
  | { kind: "leading"; term: number }
  /** Another deployment holds the lease (or it is released and not yet claimable). */
  /** `pausedByOperator`: this deployment's pause switch is on, so it works no term whatever the lease says. */
  | { kind: "standby"; current: LeaseItem | undefined; pausedByOperator?: true }
  /** The store could not be read: nothing is known, so nothing may be dropped either. */
  | { kind: "unknown"; error: unknown };

export interface LeaseGate extends PauseGate {
  /**
   * Marks the start of an invocation (a Lambda handler call): validity confirmed by an earlier
   * invocation of this container is not trusted, so the next gate read is a store round.
   */
  beginInvocation(): void;
  /**
   * The term to stamp new work with, keeping or acquiring the lease first if needed; undefined while this
   * deployment is a standby or the store cannot be reached.
   */
  currentTerm(): Promise<number | undefined>;
  /** As currentTerm, telling a standby apart from an unreachable store. */
  standing(): Promise<Standing>;
  /**
   * One acquire/keep/contest round; calls `onWon` when it wins a new term, with `remainingMs`, the
   * time the calling invocation still has (when it knows it). Throws LeaseStoreError.
   */
  acquireOrKeep(remainingMs?: () => number): Promise<LeaseOutcome>;
  /** Gives the term up (see Lease.release): nobody keeps it any more, this gate closes at once. */
  release(): Promise<boolean>;
}

/** What a won term is announced to: the term, and the time the winning invocation still has (when it knows it). */
export type OnWonTerm = (term: number, remainingMs?: () => number) => void | Promise<void>;

/** What one acquire/keep round established. */
export type LeaseOutcome =
  | {
      holding: true;
      term: number;
      /**
       * This round claimed the term's once-per-term marker in the lease item: run a discovery and
       * publish the startup event. A cold container that finds its deployment already leading does
       * not get it.
       */
      wonNewTerm: boolean;
      /** This round's claim created the term (the lease changed hands, or was taken after expiry). */
      tookOver: boolean;
      validForMs: number;
    }
  | {
      holding: false;
      /** The stored lease as last seen, when there is one. */
      current: LeaseItem | undefined;
      /** Wall-clock ms from which this deployment may claim `current` if nobody keeps it before. */
      claimableAt?: number;
    };
