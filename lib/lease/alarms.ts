/**
 * What a lease round reports besides its outcome (docs/operations.md): a site left without a valid
 * holder for longer than a takeover takes, another deployment nobody declared, and a holder whose
 * bounds differ from ours. Each is logged once and counted (or gauged) at every round.
 */
import { EXTRA_METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { LeaseSettings } from "./settings";
import type { LeaseItem } from "../ports/lease-store";

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
 * holder's and `settings`'), one keep interval and TAKEOVER_MARGIN_MS. Counted from the last time
 * the holder kept the lease that is lease duration + skew + rpc_ttl + the margin. An absent item was never taken,
 * so there is no instant to count from: it does not count.
 */
function unheldTooLong(item: LeaseItem | undefined, settings: LeaseSettings, now: number): boolean {
  if (item === undefined) return false;
  const skew = Math.max(settings.skewBoundMs, item.skewBoundMs ?? 0);
  const horizon = Math.max(settings.deliveryHorizonMs ?? 0, item.deliveryHorizonMs ?? 0);
  return now - item.expiresAt > skew + horizon + settings.keepIntervalMs + TAKEOVER_MARGIN_MS;
}

export class LeaseAlarms {
  /** What was already logged (peers, holders' differing bounds, lapsed terms): logged once, counted every round. */
  private readonly reported = new Set<string>();

  constructor(
    private readonly settings: LeaseSettings,
    private readonly deps: { clock: Clock; logger: Logger; metrics: Metrics },
  ) {}

  /**
   * The gauge behind the "no deployment holds the lease" alarm, from the item this round read
   * before any claim of its own: a round that finds the lease unheld for too long reports the outage
   * even when it ends it by claiming, so a late takeover is seen too.
   */
  reportUnheld(item: LeaseItem | undefined): void {
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
   * Says so loudly when the lease item shows another deployment nobody declared (`lease.peers`), or
   * a holder whose skew bound or request TTL differ from ours: each is logged once, and counted at
   * every round so the alarm stays on while it lasts. The item's horizon is the term's, not only
   * the last writer's: after the holder's rollout lowered `rpc_ttl` it stays longer until the old
   * containers' requests can no longer run (at most their TTL after they last kept the lease), and so
   * does the count, because the takeover is that much slower meanwhile; then it stops by itself.
   */
  inspect(item: LeaseItem | undefined): void {
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
}
