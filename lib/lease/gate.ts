/**
 * The pause gate (docs/behaviour.md §4) over the lease. It opens only while this deployment holds the term
 * the work was admitted under and the remaining validity covers the whole next attempt, so an
 * attempt that starts before a takeover is also over before it. Nothing is cached beyond the
 * lease's own monotonic deadline: when that is too short the gate renews first, and any store
 * failure reads closed.
 */
import { AttemptExceedsLeaseError, LeaseLostError, LeaseStoreError, LeaseUnconfirmedError, LeaseValidityShortError, PausedError } from "../errors";
import { EXTRA_METRIC, METRIC, silentLogger, systemClock, type AttemptWindow, type Clock, type Logger, type Metrics, type PauseGate } from "../ports";
import { Lease, type LeaseItem, type LeaseOutcome, type LeaseStore } from "./lease";
import type { PauseStore } from "./pause";
import type { LeaseSettings } from "./settings";

/** The term every piece of work carries when leader election is off. */
export const UNELECTED_TERM = 0;

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
   * The term to stamp new work with, renewing or acquiring first if needed; undefined while this
   * deployment is a standby or the store cannot be reached.
   */
  currentTerm(): Promise<number | undefined>;
  /** As currentTerm, telling a standby apart from an unreachable store. */
  standing(): Promise<Standing>;
  /**
   * One acquire/renew/contest round; calls `onWon` when it wins a new term, with `remainingMs`, the
   * time the calling invocation still has (when it knows it). Throws LeaseStoreError.
   */
  acquireOrRenew(remainingMs?: () => number): Promise<LeaseOutcome>;
  /** Gives the term up (see Lease.release): no renewals any more, this gate closes at once. */
  release(): Promise<boolean>;
}

/** What a won term is announced to: the term, and the time the winning invocation still has (when it knows it). */
export type OnWonTerm = (term: number, remainingMs?: () => number) => void | Promise<void>;

export interface LeaseGateDeps {
  /** Required when leader election is on. */
  store?: LeaseStore;
  metrics: Metrics;
  clock?: Clock;
  logger?: Logger;
  /** Called once per term across the whole deployment (the marker in the lease item): trigger a discovery and publish the startup event. */
  onWon?: OnWonTerm;
  /** The operator's pause switch (lib/lease/pause.ts), read before every lease round. */
  pause?: PauseStore;
}

export function createLeaseGate(settings: LeaseSettings, deps: LeaseGateDeps): LeaseGate {
  if (!settings.leaderElection) return unelectedGate(deps.metrics, deps.clock ?? systemClock);
  if (!deps.store) throw new TypeError("a LeaseStore is required when leader election is on");
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger ?? silentLogger;
  const lease = new Lease(settings, { store: deps.store, clock, logger, metrics: deps.metrics });
  const maxValidityMs = settings.leaseDurationMs - settings.skewBoundMs;

  const reportPaused = () => deps.metrics.gauge(METRIC.paused, usableHolding() ? 0 : 1);

  // While the operator's switch is on, no lease round runs and the held term is not used: the
  // lease runs out and a standby takes over, as after a crash.
  let pausedByOperator = false;
  const usableHolding = () => (pausedByOperator ? undefined : lease.holding());

  async function operatorPaused(): Promise<boolean> {
    if (!deps.pause) return false;
    let paused: boolean;
    try {
      paused = (await deps.pause.read(settings.site, settings.deploymentId))?.paused === true;
    } catch (error) {
      deps.metrics.count(EXTRA_METRIC.leaseStoreErrors);
      throw new LeaseStoreError(`could not read the pause switch of deployment ${settings.deploymentId}`, { cause: error });
    }
    if (paused !== pausedByOperator) {
      logger.warn(paused ? "paused by the operator: not working, not contesting the lease" : "resumed by the operator", {
        site: settings.site,
        deploymentId: settings.deploymentId,
      });
    }
    pausedByOperator = paused;
    return paused;
  }

  async function acquireOrRenew(remainingMs?: () => number): Promise<LeaseOutcome> {
    try {
      if (await operatorPaused()) {
        // A paused deployment does not contest, but still looks: when every deployment of the site
        // is paused, only their reads see that nobody holds the lease.
        await lease.observe();
        return { holding: false, current: undefined };
      }
      const outcome = await lease.acquireOrRenew();
      // Concurrent callers share one round and so one outcome: only the first runs onWon.
      if (outcome.holding && outcome.wonNewTerm && deps.onWon && !announced.has(outcome.term)) {
        announced.add(outcome.term);
        try {
          await deps.onWon(outcome.term, remainingMs);
        } catch (error) {
          logger.error("handling a newly won lease term failed", { site: settings.site, term: outcome.term, error });
        }
      }
      return outcome;
    } finally {
      reportPaused();
    }
  }
  const announced = new Set<number>();

  /** The holding that covers `minValidMs`, renewing first if needed; else the round's outcome, when one ran. */
  async function validHolding(minValidMs: number): Promise<{ held?: { term: number; validForMs: number }; outcome?: LeaseOutcome }> {
    const held = usableHolding();
    if (held && held.validForMs >= minValidMs) return { held };
    const outcome = await acquireOrRenew();
    const now = usableHolding();
    return now ? { held: now, outcome } : { outcome };
  }

  /** This deployment holds the lease as far as the round saw, but could not confirm it for this invocation. */
  function ownButUnconfirmed(outcome: LeaseOutcome | undefined): boolean {
    if (!outcome || pausedByOperator) return false;
    if (outcome.holding) return true;
    const current = outcome.current;
    return current !== undefined && current.holder === settings.deploymentId && !current.released;
  }

  return {
    beginInvocation() {
      lease.beginInvocation();
    },

    async assertOpen(term, attemptTimeoutMs): Promise<AttemptWindow> {
      try {
        if (attemptTimeoutMs > maxValidityMs) {
          throw new AttemptExceedsLeaseError(
            `an attempt of ${attemptTimeoutMs} ms cannot fit in one lease validity of ${maxValidityMs} ms (lease duration minus skew bound)`,
          );
        }
        let found;
        try {
          found = await validHolding(attemptTimeoutMs);
        } catch (error) {
          throw new PausedError(`paused: the lease store for site ${settings.site} could not be reached`, { cause: error });
        }
        const held = found.held;
        if (!held && ownButUnconfirmed(found.outcome)) {
          throw new LeaseUnconfirmedError(`paused: the lease of site ${settings.site} names deployment ${settings.deploymentId} as holder, but this round could not confirm it`);
        }
        if (!held) throw new PausedError(`paused: deployment ${settings.deploymentId} does not hold the lease for site ${settings.site}`);
        if (held.term !== term) {
          throw new LeaseLostError(`work admitted under lease term ${term} is stale: the current term is ${held.term}`);
        }
        if (held.validForMs < attemptTimeoutMs) {
          throw new LeaseValidityShortError(`paused: the lease is valid for ${Math.floor(held.validForMs)} ms, less than the ${attemptTimeoutMs} ms attempt`);
        }
        return { term, stampedAt: clock.now(), endsBy: clock.monotonic() + attemptTimeoutMs };
      } finally {
        reportPaused();
      }
    },

    async currentTerm() {
      const standing = await this.standing();
      return standing.kind === "leading" ? standing.term : undefined;
    },

    async standing(): Promise<Standing> {
      try {
        const held = usableHolding();
        if (held) return { kind: "leading", term: held.term };
        const outcome = await acquireOrRenew();
        // Known for certain: the operator's switch keeps this deployment out of every term.
        if (pausedByOperator) return { kind: "standby", current: undefined, pausedByOperator: true };
        const now = usableHolding();
        if (now) return { kind: "leading", term: now.term };
        if (outcome.holding) {
          // Held, but not usable by this invocation (confirmed by a round of an earlier one, or its
          // validity ran out meanwhile): not known, so nothing may be dropped as a standby's.
          return { kind: "unknown", error: new PausedError(`the lease of deployment ${settings.deploymentId} is held but not confirmed for this invocation`) };
        }
        const current = outcome.current;
        if (current && current.holder === settings.deploymentId && !current.released) {
          // Our own deployment holds it, but this round could not confirm it (an unsettled write).
          return { kind: "unknown", error: new PausedError(`the lease of deployment ${settings.deploymentId} could not be confirmed`) };
        }
        return { kind: "standby", current };
      } catch (error) {
        return { kind: "unknown", error };
      } finally {
        reportPaused();
      }
    },

    acquireOrRenew,
    release: async () => {
      try {
        return await lease.release();
      } finally {
        reportPaused();
      }
    },
  };
}

function unelectedGate(metrics: Metrics, clock: Clock): LeaseGate {
  const open = () => metrics.gauge(METRIC.paused, 0);
  return {
    beginInvocation() {},
    async assertOpen(term, attemptTimeoutMs) {
      open();
      return { term, stampedAt: clock.now(), endsBy: clock.monotonic() + attemptTimeoutMs };
    },
    async currentTerm() {
      open();
      return UNELECTED_TERM;
    },
    async standing() {
      open();
      return { kind: "leading", term: UNELECTED_TERM };
    },
    async acquireOrRenew() {
      open();
      return { holding: true, term: UNELECTED_TERM, wonNewTerm: false, tookOver: false, validForMs: Number.POSITIVE_INFINITY };
    },
    async release() {
      return false;
    },
  };
}
