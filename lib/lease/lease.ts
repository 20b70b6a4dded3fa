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
import { LeaseStoreError, messageOf, ProvisionerError } from "../errors";
import { EXTRA_METRIC, type Clock, type Logger, type Metrics } from "../ports";
import type { LeaseSettings } from "./settings";

/** The lease item as stored; `expiresAt` is wall-clock epoch ms on the writer's clock. */
export interface LeaseItem {
  site: string;
  holder: string;
  term: number;
  expiresAt: number;
  /**
   * The term whose startup event and immediate discovery have been claimed (the once-per-term
   * marker); below `term` while nobody has announced the current term yet.
   */
  announcedTerm?: number;
  /** The holder gave the term up: it can no longer be extended, only claimed after expiry. */
  released?: boolean;
  /**
   * What a challenger must honour, on top of its own (it waits the larger of each): the skew bound of
   * the holder's last write, and the delivery horizon past `expiresAt`. `expiresAt +
   * deliveryHorizonMs` is the term's delivery deadline: the latest instant (plus skew) at which a
   * request any container of the holder sent under this term may still be executed at a node. No
   * write of a term moves it earlier (see extensionOf); a claim starts it from the winner's own.
   * Absent on items written before they were recorded.
   */
  skewBoundMs?: number;
  deliveryHorizonMs?: number;
  /** Every deployment whose rounds touched this site's lease, with the wall-clock ms (its own clock) of its last round. */
  peers?: Record<string, number>;
}

/** What an operator or status report may say about the stored lease, read on this machine's clock. */
export interface LeaseDescription {
  /** The holder, unless the lease is released or was never taken. */
  leader: string | null;
  term: number | null;
  /** The stored expiry of a lease that is held (possibly already past); null when released. */
  expiresAt: number | null;
  heldByThisDeployment: boolean;
}

/**
 * The one reading of a stored lease outside the election itself. A released lease (the `released`
 * flag, or the expiry of 0 that older items carry) has no leader; a held one is this deployment's
 * only while its expiry is ahead on this clock.
 */
export function describeLease(item: LeaseItem | undefined, deploymentId: string, now: number): LeaseDescription {
  const held = isHeld(item);
  return {
    leader: held ? item.holder : null,
    term: item?.term ?? null,
    expiresAt: held ? item.expiresAt : null,
    heldByThisDeployment: leadsAt(item, deploymentId, now),
  };
}

/** A lease someone holds (its expiry may be past): not released, and taken at least once. */
function isHeld(item: LeaseItem | undefined): item is LeaseItem {
  return item !== undefined && item.released !== true && item.expiresAt > 0;
}

/**
 * Whether `deploymentId` leads at wall-clock `now` by the stored lease: it holds it and the expiry,
 * less `skewBoundMs` (another machine's clock may be that far ahead), is still ahead.
 */
export function leadsAt(item: LeaseItem | undefined, deploymentId: string, now: number, skewBoundMs = 0): boolean {
  return isHeld(item) && item.holder === deploymentId && item.expiresAt - skewBoundMs > now;
}

/**
 * Gives up the stored term on behalf of `holder` (a function that never took part in the election,
 * e.g. the operator's release): marks it released if `holder` holds it, keeping the expiry (see
 * Lease.release). `term` when known, else the stored one. `released`: the store confirmed it.
 */
export async function releaseOnBehalf(
  store: Pick<LeaseStore, "read" | "release">,
  request: { site: string; holder: string; term?: number },
): Promise<{ released: boolean; term: number | undefined }> {
  const term = request.term ?? (await store.read(request.site))?.term;
  if (term === undefined) return { released: false, term };
  return { released: (await store.release({ site: request.site, holder: request.holder, term })).applied, term };
}

/** The result of one conditional write: the item after it, or the item that failed the condition. */
export type ConditionalWrite = { applied: true; item: LeaseItem } | { applied: false; current: LeaseItem | undefined };

/** What a holder writes with every claim and extension, so that a challenger can honour it. */
export interface HolderBounds {
  skewBoundMs: number;
  deliveryHorizonMs: number;
  /** Wall-clock ms of this round, recorded as `peers.<holder>`. */
  seenAt: number;
}

export interface ClaimRequest extends HolderBounds {
  site: string;
  holder: string;
  expiresAt: number;
  /** The lease may be taken over only if its stored `expiresAt` is below this. */
  expiredBefore: number;
  /**
   * The delivery horizon `expiredBefore` waited out past the expiry. The claim also fails if the
   * stored horizon is longer: a write since the claimant read the item (it may have read it before
   * a freeze) moved the term's delivery deadline later than it waited for.
   */
  waitedHorizonMs: number;
}

/** A round that writes nothing else records that `deployment` took part, as `peers.<deployment> = seenAt`. */
export interface PeerRequest {
  site: string;
  deployment: string;
  seenAt: number;
}

/** Claims the announcement of `term` (startup event + immediate discovery) for its holder, once. */
export interface AnnounceRequest {
  site: string;
  holder: string;
  term: number;
}

export interface ExtendRequest extends HolderBounds {
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
  /**
   * If the item is absent, or `expiresAt < expiredBefore` and its delivery horizon is at most
   * `waitedHorizonMs`: set holder, expiry and the claimant's bounds, term + 1 (1 when absent).
   */
  claim(request: ClaimRequest): Promise<ConditionalWrite>;
  /**
   * If holder (and term, when given) match and the term is not released, and the request would
   * raise the stored expiry or the term's delivery deadline: write the lease extensionOf gives.
   * A request the stored lease already covers is not applied (the stored item is returned).
   */
  extend(request: ExtendRequest): Promise<ConditionalWrite>;
  /**
   * If holder and term match: mark the term released (no more extensions). `expiresAt` is kept:
   * other invocations of the holder may still count on it, so a challenger still waits for it.
   */
  release(request: ReleaseRequest): Promise<ConditionalWrite>;
  /** If holder and term match and `announcedTerm` is absent or lower: set `announcedTerm = term`. */
  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite>;
  /** If the item exists: set `peers.<deployment> = seenAt` (nothing else changes). */
  recordPeer(request: PeerRequest): Promise<void>;
  /** Strongly consistent read. */
  read(site: string): Promise<LeaseItem | undefined>;
}

/** The stored lease's timing after an extension: its expiry and the delivery horizon past it. */
export interface ExtendedTiming {
  expiresAt: number;
  deliveryHorizonMs: number;
}

/** Until when (plus skew) a request sent under the item's term may still be executed at a node. */
function deliveryDeadline(item: LeaseItem): number {
  return item.expiresAt + (item.deliveryHorizonMs ?? 0);
}

/**
 * What `request` makes of the stored lease, the rule both stores apply: undefined when it may not
 * extend it (another holder or term, released) or when the stored lease already covers it (expiry
 * and delivery deadline at least the request's). The expiry becomes the later of the two, and so
 * does the delivery deadline: the containers of one deployment can send with different request
 * TTLs (a rollout that changes `rpc_ttl`), and a request one of them let go may be executed until
 * its own deadline whichever container writes last. The horizon is stored past the new expiry, so
 * once the containers with the longer TTL stop renewing it comes down to the writers' own within
 * that TTL, instead of keeping the longest for as long as the term lasts.
 */
export function extensionOf(stored: LeaseItem, request: ExtendRequest): ExtendedTiming | undefined {
  if (stored.holder !== request.holder || stored.released || (request.term !== undefined && stored.term !== request.term)) return undefined;
  const storedDeadline = deliveryDeadline(stored);
  const requestedDeadline = request.expiresAt + request.deliveryHorizonMs;
  if (request.expiresAt <= stored.expiresAt && requestedDeadline <= storedDeadline) return undefined;
  const expiresAt = Math.max(stored.expiresAt, request.expiresAt);
  return { expiresAt, deliveryHorizonMs: Math.max(storedDeadline, requestedDeadline) - expiresAt };
}

/** What one acquire/renew established. */
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
    };

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

/**
 * A peer whose last round is older than this (on its own clock) is taken as gone: a decommissioned
 * deployment stays in the item but no longer raises the alarm.
 */
const PEER_RECENT_MS = 5 * 60_000;

/**
 * Slack on top of a takeover's own bounds before an unheld lease counts as an outage: one scheduled
 * lease-keeper run that started late or not at all (EventBridge fires once a minute), so a standby
 * that took over on time never raises the alarm.
 */
const TAKEOVER_MARGIN_MS = 60_000;

/**
 * Whether `item` shows a site with no valid holder for longer than a takeover should take: the
 * expiry (kept on release) is older than the skew bound and the delivery horizon (the larger of the
 * holder's and `settings`'), one renew interval and TAKEOVER_MARGIN_MS. Counted from the holder's
 * last renewal that is lease duration + skew + rpc_ttl + the margin. An absent item was never taken,
 * so there is no instant to count from: it does not count.
 */
function unheldTooLong(item: LeaseItem | undefined, settings: LeaseSettings, now: number): boolean {
  if (item === undefined) return false;
  const skew = Math.max(settings.skewBoundMs, item.skewBoundMs ?? 0);
  const horizon = Math.max(settings.deliveryHorizonMs ?? 0, item.deliveryHorizonMs ?? 0);
  return now - item.expiresAt > skew + horizon + settings.renewIntervalMs + TAKEOVER_MARGIN_MS;
}

/** A lease write that this process could not settle; the lease reads as not held. */
class UnsettledWrite extends ProvisionerError {}

/** A round that did not complete within its bound; the gate reads closed. */
class RoundTimeout extends ProvisionerError {}

export class Lease {
  private held: Held | undefined;
  /** The round in flight and the invocation it started in; only that invocation shares it. */
  private inFlight: { invocation: number; round: Promise<LeaseOutcome> } | undefined;
  /** Counts invocations (beginInvocation); validity confirmed in an earlier one is not trusted. */
  private invocation = 0;
  /** What inspect already logged (peers, holders' differing bounds): logged once, counted every round. */
  private readonly reported = new Set<string>();

  constructor(
    readonly settings: LeaseSettings,
    private readonly deps: LeaseDeps,
  ) {}

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
   * Renews the lease when this deployment holds it, takes it over when it is absent or expired,
   * and otherwise reports who holds it. Concurrent callers in one process share one round trip;
   * each caller waits at most the round timeout. Throws LeaseStoreError when the store cannot be
   * reached in time or a write cannot be settled; the lease then reads as not held until a later
   * call succeeds.
   */
  async acquireOrRenew(): Promise<LeaseOutcome> {
    const invocation = this.invocation;
    // A round left over from an earlier invocation (it outlived its bound) confirms nothing for this
    // one: its outcome would count for the invocation it started in. This invocation runs its own.
    if (this.inFlight?.invocation !== invocation) {
      const started = this.contest(invocation).finally(() => {
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
      `acquire or renew the lease for site ${this.settings.site}`,
      new RoundTimeout(`the lease round did not complete within ${limitMs} ms`),
    );
  }

  /**
   * Gives the term up: the item is marked released, so no invocation of this deployment can
   * extend it any more, and this process's gate closes at once. The expiry is kept, because other
   * invocations of this deployment may still be running attempts they were admitted for; a
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

  private async contest(invocation: number): Promise<LeaseOutcome> {
    const { site, deploymentId: holder } = this.settings;
    try {
      const knownTerm = this.held?.term;
      let renewal = await this.extend(knownTerm, invocation);
      if (renewal.outcome) return renewal.outcome;
      let current = renewal.current;
      if (current?.holder === holder && !current.released && knownTerm !== undefined && current.term !== knownTerm) {
        // Another invocation of this deployment re-took the lease under a newer term after ours lapsed.
        renewal = await this.extend(current.term, invocation);
        if (renewal.outcome) return renewal.outcome;
        current = renewal.current;
      }
      this.inspect(current);
      this.reportUnheld(current);
      if (current === undefined || current.expiresAt < this.claimableBefore(current)) {
        return await this.claim(current, invocation);
      }
      await this.recordPresence();
      return this.standby(current);
    } catch (error) {
      // A late round's failure says nothing about what a later invocation has confirmed since.
      if (this.held === undefined || this.held.invocation <= invocation) this.held = undefined;
      throw this.storeFailed(`acquire or renew the lease for site ${site}`, error);
    }
  }

  /**
   * Reads the lease item without contesting it (a deployment the operator paused) and reports
   * whether the site has gone without a holder for too long; undefined when the read failed.
   */
  async observe(): Promise<LeaseItem | undefined> {
    try {
      const item = await this.deps.store.read(this.settings.site);
      this.reportUnheld(item);
      return item;
    } catch (error) {
      this.storeFailed(`read the lease for site ${this.settings.site}`, error);
      return undefined;
    }
  }

  /**
   * The gauge behind the "no deployment holds the lease" alarm, from the item this round read
   * before any claim of its own: a round that finds the lease unheld for too long reports the outage
   * even when it ends it by claiming, so a late takeover is seen too.
   */
  private reportUnheld(item: LeaseItem | undefined): void {
    const now = this.deps.clock.now();
    const unheld = unheldTooLong(item, this.settings, now);
    this.deps.metrics.gauge(EXTRA_METRIC.leaseUnheld, unheld ? 1 : 0);
    // Logged once per lapsed term; the gauge says it at every round.
    if (unheld && item && !this.reported.has(`unheld:${item.term}`)) {
      this.reported.add(`unheld:${item.term}`);
      this.deps.logger.error("no deployment holds this site's lease, for longer than a takeover takes", {
        site: this.settings.site,
        deploymentId: this.settings.deploymentId,
        lastHolder: item.holder,
        term: item.term,
        released: item.released === true,
        unheldForSeconds: Math.round((now - item.expiresAt) / 1000),
      });
    }
  }

  /**
   * A challenger may take over a lease whose expiry is older than this on its own wall clock: the
   * skew bound, plus the delivery horizon (how long after its envelope time a request the old
   * holder stamped may still execute at a node), each the larger of its own and the holder's: the
   * holder's requests live at the nodes for the holder's TTL, whatever the challenger configured.
   */
  private claimableBefore(current: LeaseItem | undefined): number {
    const skew = Math.max(this.settings.skewBoundMs, current?.skewBoundMs ?? 0);
    return this.deps.clock.now() - skew - this.horizonToWait(current);
  }

  private horizonToWait(current: LeaseItem | undefined): number {
    return Math.max(this.settings.deliveryHorizonMs ?? 0, current?.deliveryHorizonMs ?? 0);
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

  /**
   * Says so loudly when the lease item shows another deployment nobody declared (`lease.peers`), or
   * a holder whose skew bound or request TTL differ from ours: each is logged once, and counted at
   * every round so the alarm stays on while it lasts. The item's horizon is the term's, not only
   * the last writer's: after the holder's rollout lowered `rpc_ttl` it stays longer until the old
   * containers' requests can no longer run (at most their TTL after their last renewal), and so
   * does the count, because the takeover is that much slower meanwhile; then it stops by itself.
   */
  private inspect(item: LeaseItem | undefined): void {
    if (!item) return;
    const { site, deploymentId, skewBoundMs } = this.settings;
    const horizonMs = this.settings.deliveryHorizonMs ?? 0;
    const now = this.deps.clock.now();
    const unknown = Object.entries(item.peers ?? {})
      .filter(([peer, seenAt]) => peer !== deploymentId && !(this.settings.knownPeers ?? []).includes(peer) && now - seenAt <= PEER_RECENT_MS)
      .map(([peer]) => peer);
    if (unknown.length > 0) {
      this.deps.metrics.count(EXTRA_METRIC.leaseUnknownPeers, unknown.length);
      for (const peer of unknown.filter((peer) => !this.reported.has(`peer:${peer}`))) {
        this.reported.add(`peer:${peer}`);
        this.deps.logger.error("another deployment contests this site's lease and is not in lease.peers: is a second stack running for this site?", {
          site,
          deploymentId,
          peer,
          holder: item.holder,
        });
      }
    }
    const differs =
      item.holder !== deploymentId &&
      ((item.skewBoundMs !== undefined && item.skewBoundMs !== skewBoundMs) || (item.deliveryHorizonMs !== undefined && item.deliveryHorizonMs !== horizonMs));
    if (differs) {
      this.deps.metrics.count(EXTRA_METRIC.leaseSettingsMismatch);
      const key = `bounds:${item.holder}:${item.term}`;
      if (!this.reported.has(key)) {
        this.reported.add(key);
        this.deps.logger.warn("this deployment's lease bounds differ from the holder's; a takeover waits the larger of each", {
          site,
          deploymentId,
          holder: item.holder,
          term: item.term,
          skewBoundMs,
          holderSkewBoundMs: item.skewBoundMs,
          deliveryHorizonMs: horizonMs,
          holderDeliveryHorizonMs: item.deliveryHorizonMs,
        });
      }
    }
  }

  private async extend(term: number | undefined, invocation: number): Promise<{ outcome?: LeaseOutcome; current?: LeaseItem }> {
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

  private async claim(seen: LeaseItem | undefined, invocation: number): Promise<LeaseOutcome> {
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
    return this.standby(result.current);
  }

  private standby(current: LeaseItem | undefined): LeaseOutcome {
    if (this.held) {
      this.deps.logger.warn("lost the lease", { site: this.settings.site, term: this.held.term, holder: current?.holder, currentTerm: current?.term });
    }
    this.held = undefined;
    return { holding: false, current };
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
        error: writeError,
      });
      let current: LeaseItem | undefined;
      try {
        current = await this.deps.store.read(this.settings.site);
      } catch (readError) {
        // A chain has one cause: the read's is the cause, the write's is named here, so neither is lost.
        throw new UnsettledWrite(`lease write outcome unknown (${messageOf(writeError)}) and the settling read failed`, { cause: readError });
      }
      return this.covers(current, expiresAt, term) ? { applied: true, item: current as LeaseItem } : { applied: false, current };
    }
  }

  private async hold(item: LeaseItem, expiresAt: number, sentAt: number, invocation: number, tookOver: boolean): Promise<LeaseOutcome> {
    const deadline = sentAt + this.settings.leaseDurationMs - this.settings.skewBoundMs;
    // A late round of an earlier invocation must not replace what a later one confirmed.
    if (this.held === undefined || this.held.invocation <= invocation) this.held = { term: item.term, deadline, expiresAt, invocation };
    this.deps.metrics.gauge(EXTRA_METRIC.leaseTerm, item.term);
    this.deps.metrics.gauge(EXTRA_METRIC.leaseUnheld, 0);
    this.inspect(item);
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
