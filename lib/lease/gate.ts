/**
 * The pause gate (docs/behaviour.md §4) over the lease. It opens only while this deployment holds the term
 * the work was admitted under and the remaining validity covers the whole next attempt, so an
 * attempt that starts before a takeover is also over before it. Nothing is cached beyond the
 * lease's own monotonic deadline: when that is too short the gate keeps the lease first, and any store
 * failure reads closed. What its callers see (LeaseGate, Standing) is in lib/ports/lease-gate.ts; the gate
 * without leader election in unelected-gate.ts; the operator's switch it reads in pause.ts.
 */
import { AttemptExceedsLeaseError, LeaseLostError, LeaseUnconfirmedError, LeaseValidityShortError, PausedError } from "../errors";
import { METRIC } from "../ports/metric-names";
import { silentLogger, type Logger } from "../ports/logger";
import { systemClock, type Clock } from "../ports/clock";
import type { AttemptWindow, LeaseGate, OnWonTerm, Standing } from "../ports/lease-gate";
import type { Metrics } from "../ports/metrics";
import { Lease } from "./lease";
import { type LeaseOutcome } from "../ports/lease-gate";
import { PauseSwitch } from "./pause";
import type { PauseStore } from "../ports/pause-store";
import type { LeaseSettings } from "./settings";
import type { LeaseStore } from "../ports/lease-store";
import { unelectedGate } from "./unelected-gate";

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
  private readonly pause: PauseSwitch;
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
    this.pause = new PauseSwitch(deps.pause, settings, { metrics: deps.metrics, logger: this.logger });
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
      const outcome = await this.acquireOrKeep();
      // Known for certain: the operator's switch keeps this deployment out of every term.
      if (this.pause.paused) return { kind: "standby", current: undefined, pausedByOperator: true };
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

  async acquireOrKeep(remainingMs?: () => number): Promise<LeaseOutcome> {
    try {
      if (await this.pause.read()) {
        // A paused deployment does not contest, but still looks: when every deployment of the site
        // is paused, only their reads see that nobody holds the lease.
        await this.lease.observe();
        return { holding: false, current: undefined };
      }
      const outcome = await this.lease.acquireOrKeep();
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

  private usableHolding(): HeldTerm | undefined {
    return this.pause.paused ? undefined : this.lease.holding();
  }

  private reportPaused(): void {
    this.deps.metrics.gauge(METRIC.paused, this.usableHolding() ? 0 : 1);
  }

  /** The holding that covers an attempt of `minValidMs`, keeping the lease first if needed; throws why the gate is closed when there is none. */
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

  /** The holding that covers `minValidMs`, keeping the lease first if needed; else the round's outcome, when one ran. */
  private async validHolding(minValidMs: number): Promise<{ held?: HeldTerm; outcome?: LeaseOutcome }> {
    const held = this.usableHolding();
    if (held && held.validForMs >= minValidMs) return { held };
    const outcome = await this.acquireOrKeep();
    const now = this.usableHolding();
    return now ? { held: now, outcome } : { outcome };
  }

  /** This deployment holds the lease as far as the round saw, but could not confirm it for this invocation. */
  private ownButUnconfirmed(outcome: LeaseOutcome | undefined): boolean {
    if (!outcome || this.pause.paused) return false;
    if (outcome.holding) return true;
    const current = outcome.current;
    return current !== undefined && current.holder === this.settings.deploymentId && !current.released;
  }
}
