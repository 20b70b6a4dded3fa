/**
 * How a term of the per-site lease (docs/behaviour.md §5, docs/lease.md) is won, kept and lost.
 * Holding the lease for term T is what makes this deployment the leader; the term is the fencing
 * token that stamps admitted work. Every round runs the same rules, and none trusts another
 * machine's clock:
 *
 * - Keep: a holder extends its own term, never shortening the stored expiry (the store's
 *   extensionOf), so concurrent invocations of one deployment cannot pull it below what any of
 *   them counts on. It counts the term valid until a monotonic deadline taken before its write was
 *   sent, plus the lease duration, minus the skew bound (its margin), and only in the invocation
 *   whose round confirmed it.
 * - Win: a challenger takes the lease over only when it is absent, or when its own wall clock is
 *   past the stored expiry plus the skew bound and the delivery horizon (each the larger of its own
 *   and the holder's). The claim makes term + 1; the round that also claims the term's marker
 *   announces it.
 * - Lose: a round that finds another holder, or its own write not applied, holds nothing; a store
 *   failure reads as not held until a later round succeeds.
 * - Release: the holder marks its term released (no more keeping it), keeping the expiry, so a
 *   standby still waits out the requests this deployment's invocations may have sent.
 *
 * The store's writes and how an unknown outcome is settled are in store.ts; the alarms a round
 * raises in alarms.ts; the readings of a stored lease in reading.ts.
 */
import { LeaseStoreError, ProvisionerError } from "../errors";
import { EXTRA_METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import { LeaseAlarms } from "./alarms";
import type { LeaseSettings } from "./settings";
import { deliveryDeadline, releaseOnBehalf, settledWrite } from "./stored-lease";
import type { ConditionalWrite, HolderBounds, LeaseItem, LeaseStore } from "../ports/lease-store";
import type { LeaseOutcome } from "../ports/lease-gate";
interface Held {
  term: number;
  /** Monotonic ms after which this process must not act under `term`. */
  deadline: number;
  /** The wall-clock expiry this process wrote (or found covering its write); valid until `expiresAt - skewBound`. */
  expiresAt: number;
  /** The invocation the confirming round ran in; a later invocation does not trust it. */
  invocation: number;
}

export interface LeaseDeps {
  store: LeaseStore;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

/** A round that did not complete within its bound; the gate reads closed. */
class RoundTimeout extends ProvisionerError {}

export class Lease {
  private held: Held | undefined;
  /** The round in flight and the invocation it started in; only that invocation shares it. */
  private inFlight: { invocation: number; round: Promise<LeaseOutcome> } | undefined;
  /** Counts invocations (beginInvocation); validity confirmed in an earlier one is not trusted. */
  private invocation = 0;
  private readonly alarms: LeaseAlarms;

  constructor(
    readonly settings: LeaseSettings,
    private readonly deps: LeaseDeps,
  ) {
    this.alarms = new LeaseAlarms(settings, deps);
  }

  /**
   * Starts a new invocation: whatever this process confirmed before (a warm container's earlier
   * invocation, possibly before a freeze of unknown length) no longer opens the gate; the next
   * gate read is a round against the store.
   */
  beginInvocation(): void {
    this.invocation++;
  }

  /**
   * The term held right now and how long it stays valid, or undefined; never touches the store.
   * Valid means: confirmed by a round of this invocation, and both the monotonic deadline and the
   * written wall-clock expiry minus the skew bound still ahead. The wall-clock half catches a
   * freeze the monotonic clock did not count.
   */
  holding(): { term: number; validForMs: number } | undefined {
    const held = this.held;
    if (!held || held.invocation !== this.invocation) return undefined;
    const byMonotonic = held.deadline - this.deps.clock.monotonic();
    const byWallClock = held.expiresAt - this.settings.skewBoundMs - this.deps.clock.now();
    const validForMs = Math.min(byMonotonic, byWallClock);
    return validForMs > 0 ? { term: held.term, validForMs } : undefined;
  }

  /**
   * Keeps the lease when this deployment holds it, takes it over when it is absent or expired,
   * and otherwise reports who holds it. Concurrent callers in one process share one round trip;
   * each caller waits at most the round timeout. Throws LeaseStoreError when the store cannot be
   * reached in time or a write cannot be settled; the lease then reads as not held until a later
   * call succeeds.
   */
  async acquireOrKeep(): Promise<LeaseOutcome> {
    const invocation = this.invocation;
    // A round left over from an earlier invocation (it outlived its bound) confirms nothing for this
    // one: its outcome would count for the invocation it started in. This invocation runs its own.
    if (this.inFlight?.invocation !== invocation) {
      const started = this.round(invocation).finally(() => {
        if (this.inFlight?.round === started) this.inFlight = undefined;
      });
      this.inFlight = { invocation, round: started };
    }
    const round = this.inFlight.round;
    const limitMs = this.settings.roundTimeoutMs;
    if (limitMs === undefined) return round;
    // Real time: what it bounds is network and store latency, whatever clock judges validity.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), limitMs)));
    const outcome = await Promise.race([round, late]).finally(() => clearTimeout(timer));
    if (outcome) return outcome;
    // The round may still land later; its validity counts from before it was sent, so keeping it is safe.
    throw this.storeFailed(
      `acquire or keep the lease for site ${this.settings.site}`,
      new RoundTimeout(`the lease round did not complete within ${limitMs} ms`),
    );
  }

  /** One round: keep our term, else win a new one if the stored one has run out, else stand by. */
  private async round(invocation: number): Promise<LeaseOutcome> {
    const { site, deploymentId: holder } = this.settings;
    try {
      const knownTerm = this.held?.term;
      let kept = await this.keep(knownTerm, invocation);
      if (kept.outcome) return kept.outcome;
      let current = kept.current;
      if (current?.holder === holder && !current.released && knownTerm !== undefined && current.term !== knownTerm) {
        // Another invocation of this deployment re-took the lease under a newer term after ours lapsed.
        kept = await this.keep(current.term, invocation);
        if (kept.outcome) return kept.outcome;
        current = kept.current;
      }
      this.alarms.inspect(current);
      this.alarms.reportUnheld(current);
      if (current === undefined || current.expiresAt < this.claimableBefore(current)) {
        return await this.win(current, invocation);
      }
      await this.recordPresence();
      return this.lose(current);
    } catch (error) {
      // A late round's failure says nothing about what a later invocation has confirmed since.
      if (this.held === undefined || this.held.invocation <= invocation) this.held = undefined;
      throw this.storeFailed(`acquire or keep the lease for site ${site}`, error);
    }
  }

  /** Keep: extend `term` (any term we hold when undefined) to a full lease duration from now. */
  private async keep(term: number | undefined, invocation: number): Promise<{ outcome?: LeaseOutcome; current?: LeaseItem }> {
    const { site, deploymentId: holder, leaseDurationMs } = this.settings;
    const sentAt = this.deps.clock.monotonic();
    const expiresAt = this.deps.clock.now() + leaseDurationMs;
    const request = { site, holder, term, expiresAt, ...this.bounds() };
    const result = await this.settled(() => this.deps.store.extend(request), expiresAt, term);
    if (result.applied || this.covers(result.current, expiresAt, term)) {
      const item = result.applied ? result.item : (result.current as LeaseItem);
      return { outcome: await this.hold(item, expiresAt, sentAt, invocation, false) };
    }
    return { current: result.current };
  }

  /**
   * A challenger may take over a lease whose expiry is older than this on its own wall clock: the
   * skew bound, plus the delivery horizon (how long after its envelope time a request the old
   * holder stamped may still execute at a node), each the larger of its own and the holder's: the
   * holder's requests live at the nodes for the holder's TTL, whatever the challenger configured.
   */
  private claimableBefore(current: LeaseItem | undefined): number {
    return this.deps.clock.now() - this.waitPastExpiry(current);
  }

  private waitPastExpiry(current: LeaseItem | undefined): number {
    return Math.max(this.settings.skewBoundMs, current?.skewBoundMs ?? 0) + this.horizonToWait(current);
  }

  private horizonToWait(current: LeaseItem | undefined): number {
    return Math.max(this.settings.deliveryHorizonMs ?? 0, current?.deliveryHorizonMs ?? 0);
  }

  /** Win: claim the term after `seen`, on the condition that it is still as claimable as it looked. */
  private async win(seen: LeaseItem | undefined, invocation: number): Promise<LeaseOutcome> {
    const { site, deploymentId: holder, leaseDurationMs } = this.settings;
    const sentAt = this.deps.clock.monotonic();
    const now = this.deps.clock.now();
    const expiresAt = now + leaseDurationMs;
    const request = { site, holder, expiresAt, expiredBefore: this.claimableBefore(seen), waitedHorizonMs: this.horizonToWait(seen), ...this.bounds() };
    const result = await this.settled(() => this.deps.store.claim(request), expiresAt, undefined);
    if (result.applied || this.covers(result.current, expiresAt, undefined)) {
      const item = result.applied ? result.item : (result.current as LeaseItem);
      this.deps.logger.info("won a new lease term", { site, term: item.term, previousHolder: seen?.holder, previousTerm: seen?.term });
      return this.hold(item, expiresAt, sentAt, invocation, true);
    }
    return this.lose(result.current);
  }

  /** Lose (or stay out): another holder, or our write not applied; nothing is held any more. */
  private lose(current: LeaseItem | undefined): LeaseOutcome {
    if (this.held) {
      this.deps.logger.warn("lost the lease", { site: this.settings.site, term: this.held.term, holder: current?.holder, currentTerm: current?.term });
    }
    this.held = undefined;
    return { holding: false, current, ...(current ? { claimableAt: this.claimableAt(current) } : {}) };
  }

  /** The first wall-clock ms at which a claim may take `current` over, if it is not kept before. */
  private claimableAt(current: LeaseItem): number {
    return current.expiresAt + this.waitPastExpiry(current) + 1;
  }

  /**
   * The stored item already guarantees our lease: same holder, expected term, not released, expiry
   * at least ours, and a delivery deadline at least ours: a sibling container's later expiry with a
   * shorter request TTL does not make a challenger wait for the requests this one would send.
   */
  private covers(item: LeaseItem | undefined, expiresAt: number, term: number | undefined): boolean {
    return (
      item !== undefined &&
      item.holder === this.settings.deploymentId &&
      !item.released &&
      (term === undefined || item.term === term) &&
      item.expiresAt >= expiresAt &&
      deliveryDeadline(item) >= expiresAt + (this.settings.deliveryHorizonMs ?? 0)
    );
  }

  /** A write whose outcome is unknown counts as ours only when the settling read shows it covered. */
  private settled(write: () => Promise<ConditionalWrite>, expiresAt: number, term: number | undefined): Promise<ConditionalWrite> {
    return settledWrite(this.deps.store, this.settings.site, write, (item) => this.covers(item, expiresAt, term), this.deps.logger);
  }

  /** Holding: valid until the lease duration less the skew bound after the write was sent. */
  private async hold(item: LeaseItem, expiresAt: number, sentAt: number, invocation: number, tookOver: boolean): Promise<LeaseOutcome> {
    const deadline = sentAt + this.settings.leaseDurationMs - this.settings.skewBoundMs;
    // A late round of an earlier invocation must not replace what a later one confirmed.
    if (this.held === undefined || this.held.invocation <= invocation) this.held = { term: item.term, deadline, expiresAt, invocation };
    this.deps.metrics.gauge(EXTRA_METRIC.leaseTerm, item.term);
    this.deps.metrics.gauge(EXTRA_METRIC.leaseUnheld, 0);
    this.alarms.inspect(item);
    const wonNewTerm = (item.announcedTerm ?? 0) < item.term && (await this.claimAnnouncement(item.term));
    const validForMs = this.holding()?.validForMs ?? 0;
    return { holding: true, term: item.term, wonNewTerm, tookOver, validForMs };
  }

  /**
   * The once-per-term marker: exactly one round of one invocation of the holder wins it, however
   * many cold containers find the term. A marker write with an unknown outcome counts as lost:
   * the term is announced at most once (a missed announcement costs one discovery interval).
   */
  private async claimAnnouncement(term: number): Promise<boolean> {
    const { site, deploymentId: holder } = this.settings;
    try {
      const result = await this.deps.store.markAnnounced({ site, holder, term });
      return result.applied;
    } catch (error) {
      this.deps.logger.warn("could not claim the announcement of the lease term; it is not announced", { site, term, error });
      return false;
    }
  }

  /**
   * Release: gives the term up: the item is marked released, so no invocation of this deployment
   * can extend it any more, and this process's gate closes at once. The expiry is kept, because
   * other invocations of this deployment may still be running attempts they were admitted for; a
   * standby claims once that expiry (plus the skew bound and the delivery horizon) has passed, so
   * the handover never overlaps. Returns whether the store confirmed the release.
   */
  async release(): Promise<boolean> {
    const { site, deploymentId: holder } = this.settings;
    const known = this.held?.term;
    this.held = undefined;
    try {
      const { released, term } = await releaseOnBehalf(this.deps.store, { site, holder, ...(known === undefined ? {} : { term: known }) });
      if (term === undefined) return false;
      this.held = undefined;
      this.deps.logger.info("released the lease", { site, term, released });
      return released;
    } catch (error) {
      this.storeFailed("release", error);
      return false;
    }
  }

  /**
   * Reads the lease item without contesting it (a deployment the operator paused) and reports
   * whether the site has gone without a holder for too long; undefined when the read failed.
   */
  async observe(): Promise<LeaseItem | undefined> {
    try {
      const item = await this.deps.store.read(this.settings.site);
      this.alarms.reportUnheld(item);
      return item;
    } catch (error) {
      this.storeFailed(`read the lease for site ${this.settings.site}`, error);
      return undefined;
    }
  }

  /** What this deployment records with every write of its own: its bounds and that it took part now. */
  private bounds(): HolderBounds {
    return { skewBoundMs: this.settings.skewBoundMs, deliveryHorizonMs: this.settings.deliveryHorizonMs ?? 0, seenAt: this.deps.clock.now() };
  }

  /**
   * A standby's round writes nothing else, so it records that it took part: every deployment of the
   * site can then see every other one in the lease item (`peers`).
   */
  private async recordPresence(): Promise<void> {
    const { site, deploymentId } = this.settings;
    try {
      await this.deps.store.recordPeer({ site, deployment: deploymentId, seenAt: this.deps.clock.now() });
    } catch (error) {
      this.deps.logger.warn("could not record this deployment among the lease's peers", { site, deploymentId, error });
    }
  }

  private storeFailed(action: string, error: unknown): LeaseStoreError {
    this.deps.metrics.count(EXTRA_METRIC.leaseStoreErrors);
    this.deps.logger.error("lease store failed; the pause gate reads closed", {
      site: this.settings.site,
      action,
      error,
    });
    return new LeaseStoreError(`could not ${action}`, { cause: error });
  }
}
