/**
 * The per-site lease (docs/behaviour.md §5) written against a small conditional-write store. Holding the
 * lease for term T is what makes this deployment the leader; the term is the fencing token that
 * stamps admitted work. Safety rests on three rules, none of which trusts another machine's clock:
 *
 * - A challenger takes the lease over only when its own wall clock is past `expiresAt` plus the
 *   skew bound.
 * - A holder counts the lease valid until a monotonic deadline taken before its write was sent,
 *   plus the lease duration, minus the skew bound.
 * - A renewal never shortens `expiresAt`, so concurrent invocations of the same deployment cannot
 *   pull the expiry below what any of them counts on.
 *
 * Every write is one conditional write; a condition failure returns the stored item, so nothing is
 * read before writing. A write whose outcome is unknown (timeout, 5xx) is settled by a consistent
 * read, never assumed to have landed or failed.
 */
import { ProvisionerError, LeaseStoreError } from "../errors";
import { EXTRA_METRIC, type Clock, type Logger, type Metrics } from "../ports";
import type { LeaseSettings } from "./settings";

/** The lease item as stored; `expiresAt` is wall-clock epoch ms on the writer's clock. */
export interface LeaseItem {
  site: string;
  holder: string;
  term: number;
  expiresAt: number;
}

/** The result of one conditional write: the item after it, or the item that failed the condition. */
export type ConditionalWrite = { applied: true; item: LeaseItem } | { applied: false; current: LeaseItem | undefined };

export interface ClaimRequest {
  site: string;
  holder: string;
  expiresAt: number;
  /** The lease may be taken over only if its stored `expiresAt` is below this. */
  expiredBefore: number;
}

export interface ExtendRequest {
  site: string;
  holder: string;
  /** When given, the stored term must equal it; when absent, any term held by `holder` is extended. */
  term?: number;
  expiresAt: number;
}

export interface ReleaseRequest {
  site: string;
  holder: string;
  term: number;
}

/**
 * Conditional writes on the lease item. Implementations throw on any transport or service error;
 * the caller treats every throw as "outcome unknown" and settles it with `read`.
 */
export interface LeaseStore {
  /** If the item is absent or `expiresAt < expiredBefore`: set holder and expiry, term + 1 (1 when absent). */
  claim(request: ClaimRequest): Promise<ConditionalWrite>;
  /** If holder (and term, when given) match and the stored `expiresAt` is lower: raise it. */
  extend(request: ExtendRequest): Promise<ConditionalWrite>;
  /** If holder and term match: set `expiresAt` to 0, keeping the term so terms only ever increase. */
  release(request: ReleaseRequest): Promise<ConditionalWrite>;
  /** Strongly consistent read. */
  read(site: string): Promise<LeaseItem | undefined>;
}

/** What one acquire/renew established. */
export type LeaseOutcome =
  | {
      holding: true;
      term: number;
      /** This call took a term this process had not held before: run a discovery, publish the startup event. */
      wonNewTerm: boolean;
      validForMs: number;
    }
  | {
      holding: false;
      /** The stored lease as last seen, when there is one. */
      current: LeaseItem | undefined;
    };

interface Held {
  term: number;
  /** Monotonic ms after which this process must not act under `term`. */
  deadline: number;
}

export interface LeaseDeps {
  store: LeaseStore;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

/** A lease write that this process could not settle; the lease reads as not held. */
class UnsettledWrite extends ProvisionerError {}

export class Lease {
  private held: Held | undefined;
  /** The highest term this process has held, so a re-won term is reported once. */
  private highestHeldTerm = 0;
  private inFlight: Promise<LeaseOutcome> | undefined;

  constructor(
    readonly settings: LeaseSettings,
    private readonly deps: LeaseDeps,
  ) {}

  /** The term held right now and how long it stays valid, or undefined; never touches the store. */
  holding(): { term: number; validForMs: number } | undefined {
    if (!this.held) return undefined;
    const validForMs = this.held.deadline - this.deps.clock.monotonic();
    return validForMs > 0 ? { term: this.held.term, validForMs } : undefined;
  }

  /**
   * Renews the lease when this deployment holds it, takes it over when it is absent or expired,
   * and otherwise reports who holds it. Concurrent callers in one process share one round trip.
   * Throws LeaseStoreError when the store cannot be reached or a write cannot be settled; the
   * lease then reads as not held until a later call succeeds.
   */
  acquireOrRenew(): Promise<LeaseOutcome> {
    this.inFlight ??= this.contest().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /**
   * Gives the lease up so a standby can take over without waiting for expiry. Only for a graceful
   * stop of the whole deployment: another invocation of this deployment still working would keep
   * its gate open until its own deadline. Returns whether the store confirmed the release.
   */
  async release(): Promise<boolean> {
    const held = this.held;
    this.held = undefined;
    if (!held) return false;
    const request = { site: this.settings.site, holder: this.settings.deploymentId, term: held.term };
    try {
      const result = await this.deps.store.release(request);
      this.deps.logger.info("released the lease", { site: request.site, term: held.term, released: result.applied });
      return result.applied;
    } catch (error) {
      this.storeFailed("release", error);
      return false;
    }
  }

  private async contest(): Promise<LeaseOutcome> {
    const { site, deploymentId: holder } = this.settings;
    try {
      const knownTerm = this.held?.term;
      let renewal = await this.extend(knownTerm);
      if (renewal.outcome) return renewal.outcome;
      let current = renewal.current;
      if (current?.holder === holder && knownTerm !== undefined && current.term !== knownTerm) {
        // Another invocation of this deployment re-took the lease under a newer term after ours lapsed.
        renewal = await this.extend(current.term);
        if (renewal.outcome) return renewal.outcome;
        current = renewal.current;
      }
      if (current === undefined || current.expiresAt < this.deps.clock.now() - this.settings.skewBoundMs) {
        return await this.claim(current);
      }
      return this.standby(current);
    } catch (error) {
      this.held = undefined;
      throw this.storeFailed(`acquire or renew the lease for site ${site}`, error);
    }
  }

  private async extend(term: number | undefined): Promise<{ outcome?: LeaseOutcome; current?: LeaseItem }> {
    const { site, deploymentId: holder, leaseDurationMs } = this.settings;
    const sentAt = this.deps.clock.monotonic();
    const expiresAt = this.deps.clock.now() + leaseDurationMs;
    const result = await this.settled(() => this.deps.store.extend({ site, holder, term, expiresAt }), expiresAt, term);
    if (result.applied || this.covers(result.current, expiresAt, term)) {
      const item = result.applied ? result.item : (result.current as LeaseItem);
      return { outcome: this.hold(item.term, sentAt) };
    }
    return { current: result.current };
  }

  private async claim(seen: LeaseItem | undefined): Promise<LeaseOutcome> {
    const { site, deploymentId: holder, leaseDurationMs, skewBoundMs } = this.settings;
    const sentAt = this.deps.clock.monotonic();
    const now = this.deps.clock.now();
    const expiresAt = now + leaseDurationMs;
    const request = { site, holder, expiresAt, expiredBefore: now - skewBoundMs };
    const result = await this.settled(() => this.deps.store.claim(request), expiresAt, undefined);
    if (result.applied || this.covers(result.current, expiresAt, undefined)) {
      const item = result.applied ? result.item : (result.current as LeaseItem);
      if (seen && seen.holder !== holder) {
        this.deps.logger.info("took over an expired lease", { site, term: item.term, previousHolder: seen.holder });
      }
      return this.hold(item.term, sentAt);
    }
    return this.standby(result.current);
  }

  private standby(current: LeaseItem | undefined): LeaseOutcome {
    if (this.held) {
      this.deps.logger.warn("lost the lease", { site: this.settings.site, term: this.held.term, holder: current?.holder, currentTerm: current?.term });
    }
    this.held = undefined;
    return { holding: false, current };
  }

  /** The stored item already guarantees our lease: same holder, expected term, expiry at least ours. */
  private covers(item: LeaseItem | undefined, expiresAt: number, term: number | undefined): boolean {
    return (
      item !== undefined &&
      item.holder === this.settings.deploymentId &&
      (term === undefined || item.term === term) &&
      item.expiresAt >= expiresAt
    );
  }

  /**
   * Runs one write; if it throws, the outcome is unknown, so a consistent read decides: when the
   * stored item covers what we wrote it counts as ours, otherwise as not applied.
   */
  private async settled(write: () => Promise<ConditionalWrite>, expiresAt: number, term: number | undefined): Promise<ConditionalWrite> {
    try {
      return await write();
    } catch (writeError) {
      this.deps.logger.warn("lease write outcome unknown, settling with a consistent read", {
        site: this.settings.site,
        error: String(writeError),
      });
      let current: LeaseItem | undefined;
      try {
        current = await this.deps.store.read(this.settings.site);
      } catch (readError) {
        throw new UnsettledWrite("lease write outcome unknown and the settling read failed", { cause: readError });
      }
      return this.covers(current, expiresAt, term) ? { applied: true, item: current as LeaseItem } : { applied: false, current };
    }
  }

  private hold(term: number, sentAt: number): LeaseOutcome {
    const deadline = sentAt + this.settings.leaseDurationMs - this.settings.skewBoundMs;
    const wonNewTerm = term > this.highestHeldTerm;
    this.highestHeldTerm = Math.max(this.highestHeldTerm, term);
    this.held = { term, deadline };
    this.deps.metrics.gauge(EXTRA_METRIC.leaseTerm, term);
    if (wonNewTerm) this.deps.logger.info("holding the lease under a new term", { site: this.settings.site, term });
    return { holding: true, term, wonNewTerm, validForMs: deadline - this.deps.clock.monotonic() };
  }

  private storeFailed(action: string, error: unknown): LeaseStoreError {
    this.deps.metrics.count(EXTRA_METRIC.leaseStoreErrors);
    this.deps.logger.error("lease store failed; the pause gate reads closed", {
      site: this.settings.site,
      action,
      error: String(error),
      cause: error instanceof Error && error.cause ? String(error.cause) : undefined,
    });
    return new LeaseStoreError(`could not ${action}`, { cause: error });
  }
}
