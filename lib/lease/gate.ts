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
const UNELECTED_TERM = 0;

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
  return new ElectedLeaseGate(settings, deps, deps.store);
}

type HeldTerm = { term: number; validForMs: number };

/** The gate while leader election is on: the lease, and the operator's pause switch as last read. */
class ElectedLeaseGate implements LeaseGate {
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly lease: Lease;
  private readonly maxValidityMs: number;
  /**
   * While the operator's switch is on, no lease round runs and the held term is not used: the
   * lease runs out and a standby takes over, as after a crash.
   */
  private pausedByOperator = false;
  /** The terms whose onWon already ran. */
  private readonly announced = new Set<number>();

  constructor(
    private readonly settings: LeaseSettings,
    private readonly deps: LeaseGateDeps,
    store: LeaseStore,
  ) {
    this.clock = deps.clock ?? systemClock;
    this.logger = deps.logger ?? silentLogger;
    this.lease = new Lease(settings, { store, clock: this.clock, logger: this.logger, metrics: deps.metrics });
    this.maxValidityMs = settings.leaseDurationMs - settings.skewBoundMs;
  }

  beginInvocation(): void {
    this.lease.beginInvocation();
  }

  async assertOpen(term: number, attemptTimeoutMs: number): Promise<AttemptWindow> {
    try {
      if (attemptTimeoutMs > this.maxValidityMs) {
        throw new AttemptExceedsLeaseError(
          `an attempt of ${attemptTimeoutMs} ms cannot fit in one lease validity of ${this.maxValidityMs} ms (lease duration minus skew bound)`,
        );
      }
      const held = await this.heldForAttempt(attemptTimeoutMs);
      if (held.term !== term) {
        throw new LeaseLostError(`work admitted under lease term ${term} is stale: the current term is ${held.term}`);
      }
      if (held.validForMs < attemptTimeoutMs) {
        throw new LeaseValidityShortError(`paused: the lease is valid for ${Math.floor(held.validForMs)} ms, less than the ${attemptTimeoutMs} ms attempt`);
      }
      return { term, stampedAt: this.clock.now(), endsBy: this.clock.monotonic() + attemptTimeoutMs };
    } finally {
      this.reportPaused();
    }
  }

  async currentTerm(): Promise<number | undefined> {
    const standing = await this.standing();
    return standing.kind === "leading" ? standing.term : undefined;
  }

  async standing(): Promise<Standing> {
    const { deploymentId } = this.settings;
    try {
      const held = this.usableHolding();
      if (held) return { kind: "leading", term: held.term };
      const outcome = await this.acquireOrRenew();
      // Known for certain: the operator's switch keeps this deployment out of every term.
      if (this.pausedByOperator) return { kind: "standby", current: undefined, pausedByOperator: true };
      const now = this.usableHolding();
      if (now) return { kind: "leading", term: now.term };
      if (outcome.holding) {
        // Held, but not usable by this invocation (confirmed by a round of an earlier one, or its
        // validity ran out meanwhile): not known, so nothing may be dropped as a standby's.
        return { kind: "unknown", error: new PausedError(`the lease of deployment ${deploymentId} is held but not confirmed for this invocation`) };
      }
      const current = outcome.current;
      if (current && current.holder === deploymentId && !current.released) {
        // Our own deployment holds it, but this round could not confirm it (an unsettled write).
        return { kind: "unknown", error: new PausedError(`the lease of deployment ${deploymentId} could not be confirmed`) };
      }
      return { kind: "standby", current };
    } catch (error) {
      return { kind: "unknown", error };
    } finally {
      this.reportPaused();
    }
  }

  async acquireOrRenew(remainingMs?: () => number): Promise<LeaseOutcome> {
    try {
      if (await this.operatorPaused()) {
        // A paused deployment does not contest, but still looks: when every deployment of the site
        // is paused, only their reads see that nobody holds the lease.
        await this.lease.observe();
        return { holding: false, current: undefined };
      }
      const outcome = await this.lease.acquireOrRenew();
      if (outcome.holding && outcome.wonNewTerm) await this.announce(outcome.term, remainingMs);
      return outcome;
    } finally {
      this.reportPaused();
    }
  }

  async release(): Promise<boolean> {
    try {
      return await this.lease.release();
    } finally {
      this.reportPaused();
    }
  }

  /** Runs onWon for a newly won term. Concurrent callers share one round and so one outcome: only the first runs it. */
  private async announce(term: number, remainingMs: (() => number) | undefined): Promise<void> {
    if (!this.deps.onWon || this.announced.has(term)) return;
    this.announced.add(term);
    try {
      await this.deps.onWon(term, remainingMs);
    } catch (error) {
      this.logger.error("handling a newly won lease term failed", { site: this.settings.site, term, error });
    }
  }

  /** Reads the operator's pause switch into pausedByOperator, logging a change. */
  private async operatorPaused(): Promise<boolean> {
    const { pause } = this.deps;
    if (!pause) return false;
    const { site, deploymentId } = this.settings;
    let paused: boolean;
    try {
      paused = (await pause.read(site, deploymentId))?.paused === true;
    } catch (error) {
      this.deps.metrics.count(EXTRA_METRIC.leaseStoreErrors);
      throw new LeaseStoreError(`could not read the pause switch of deployment ${deploymentId}`, { cause: error });
    }
    if (paused !== this.pausedByOperator) {
      this.logger.warn(paused ? "paused by the operator: not working, not contesting the lease" : "resumed by the operator", { site, deploymentId });
    }
    this.pausedByOperator = paused;
    return paused;
  }

  private usableHolding(): HeldTerm | undefined {
    return this.pausedByOperator ? undefined : this.lease.holding();
  }

  private reportPaused(): void {
    this.deps.metrics.gauge(METRIC.paused, this.usableHolding() ? 0 : 1);
  }

  /** The holding that covers an attempt of `minValidMs`, renewing first if needed; throws why the gate is closed when there is none. */
  private async heldForAttempt(minValidMs: number): Promise<HeldTerm> {
    const { site, deploymentId } = this.settings;
    let found;
    try {
      found = await this.validHolding(minValidMs);
    } catch (error) {
      throw new PausedError(`paused: the lease store for site ${site} could not be reached`, { cause: error });
    }
    if (found.held) return found.held;
    if (this.ownButUnconfirmed(found.outcome)) {
      throw new LeaseUnconfirmedError(`paused: the lease of site ${site} names deployment ${deploymentId} as holder, but this round could not confirm it`);
    }
    throw new PausedError(`paused: deployment ${deploymentId} does not hold the lease for site ${site}`);
  }

  /** The holding that covers `minValidMs`, renewing first if needed; else the round's outcome, when one ran. */
  private async validHolding(minValidMs: number): Promise<{ held?: HeldTerm; outcome?: LeaseOutcome }> {
    const held = this.usableHolding();
    if (held && held.validForMs >= minValidMs) return { held };
    const outcome = await this.acquireOrRenew();
    const now = this.usableHolding();
    return now ? { held: now, outcome } : { outcome };
  }

  /** This deployment holds the lease as far as the round saw, but could not confirm it for this invocation. */
  private ownButUnconfirmed(outcome: LeaseOutcome | undefined): boolean {
    if (!outcome || this.pausedByOperator) return false;
    if (outcome.holding) return true;
    const current = outcome.current;
    return current !== undefined && current.holder === this.settings.deploymentId && !current.released;
  }
}

function unelectedGate(
metrics: Metrics, clock: Clock): LeaseGate {
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
