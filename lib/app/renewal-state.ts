/**
 * What renewal remembers between runs, per site, in one small record: the hosts it sent
 * `reprovision` that are not provisioned again yet (in flight, at most `renew.max_in_flight`), the
 * outcomes of the last renewals (one per host), the sends of the last minute (the rate), whether it
 * paused itself and why, and an operator's pending request (what to renew, never a list of the
 * fleet, so it fits whatever the fleet's size). Written with a version check so two writers never
 * lose each other's changes. What renewal knows of one host's failed tries lives on the host's
 * registry entry (`RenewalMark`), where every deployment of the site sees it. Also the pure rules
 * over both: which hosts are due, in which order, when a failed one is tried again.
 */
import type { RenewalMark } from "../ports/credentials";
import type { HostExpiry } from "../admission/site-listing";
import { SPREAD_SHARE } from "../config/renew-capacity";
import { RenewalContentionError } from "../errors";
import type { RenewalOutcome, RenewalRequest, RenewalState, RenewalStore } from "./use-case-ports";
/** Renewals measured before the measurement replaces the assumption. */
const OUT_OF_SERVICE_SAMPLES = 5;

/**
 * How long a renewed host holds its place in flight, as the last renewals measured it (the 90th
 * percentile, so a few slow nodes count), or undefined with too few to go by.
 */
export function measuredOutOfServiceMs(recent: readonly RenewalOutcome[]): number | undefined {
  const samples = recent.flatMap((outcome) => (outcome.ok && outcome.outOfServiceMs !== undefined ? [outcome.outOfServiceMs] : []));
  if (samples.length < OUT_OF_SERVICE_SAMPLES) return undefined;
  samples.sort((a, b) => a - b);
  return samples[Math.min(samples.length - 1, Math.floor(samples.length * 0.9))];
}
export function emptyRenewalState(): RenewalState {
  return { inFlight: {}, recent: [], sends: [] };
}

/**
 * The state as stored, from any earlier layout: a request that named its hosts in `identities` is
 * that selection, and the per-host `failed` marks of earlier versions are left behind (those hosts
 * are due again, which is what renewal now does with a failed host anyway).
 */
export function renewalStateFrom(stored: Record<string, unknown>): RenewalState {
  const { inFlight, recent, sends, paused, request, lastRun, wave } = stored as Partial<RenewalState> & { request?: RenewalRequest & { identities?: string[] } };
  const state: RenewalState = { ...emptyRenewalState(), ...(inFlight ? { inFlight } : {}), ...(recent ? { recent } : {}), ...(sends ? { sends } : {}) };
  if (paused) state.paused = paused;
  if (lastRun) state.lastRun = lastRun;
  if (wave) state.wave = wave;
  if (request) {
    const { identities, ...rest } = request;
    state.request = rest.selection ? rest : { ...rest, selection: { identities: identities ?? [] } };
  }
  return state;
}
/**
 * Reads, changes and writes the site's state until the write lands (a lost version check reads
 * again), and returns what `change` returned with the state written.
 */
export async function updateRenewalState<T>(store: RenewalStore, site: string, change: (state: RenewalState) => T, attempts = 5): Promise<{ state: RenewalState; result: T }> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const stored = await store.read(site);
    const state = structuredClone(stored.state);
    const result = change(state);
    if (await store.write(site, state, stored.version)) return { state, result };
  }
  throw new RenewalContentionError(`the renewal state of site ${site} kept changing under ${attempts} attempts to update it`);
}

/** How long before expiry a host is due: a fixed duration, or a fraction of its credentials' lifetime. */
export type RenewBefore = { ms: number } | { fraction: number };

/** A host in the last quarter of its window is at risk: renewal should have renewed it long before. */
const AT_RISK_SHARE = 0.25;

/** How long before expiry the host's renewal window opens. */
function windowOf(host: HostExpiry, before: RenewBefore): number {
  const { expiresAt, issuedAt } = host.credentials;
  return "ms" in before ? before.ms : before.fraction * Math.max(0, expiresAt - issuedAt);
}

/**
 * When `host` may first be renewed. The window opens `before` ahead of expiry; where in its first
 * half the host goes follows from its name, so hosts provisioned together (one expiry) are spread
 * across the window and each one's place is the same on every run.
 */
export function renewableAt(host: HostExpiry, before: RenewBefore): number {
  const lead = windowOf(host, before);
  return host.credentials.expiresAt - lead + spreadOf(host.identity) * lead * SPREAD_SHARE;
}

/** Whether the host's credentials run out within the last quarter of its window (not yet expired), whatever the registry last did with it. */
export function atRisk(host: HostExpiry, before: RenewBefore, now: number): boolean {
  const left = host.credentials.expiresAt - now;
  return left > 0 && left <= windowOf(host, before) * AT_RISK_SHARE;
}

/** A stable fraction in [0, 1) from the identity (FNV-1a). */
function spreadOf(identity: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < identity.length; index++) {
    hash ^= identity.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash / 2 ** 32;
}

/** Whether the host was provisioned again (new credentials issued) after `since`. */
export function provisionedSince(host: HostExpiry | undefined, since: number): boolean {
  return host !== undefined && host.state === "provisioned" && host.credentials.issuedAt > since;
}

/** The first retry waits this long, each next one twice as long, up to RETRY_MAX_MS. */
const RETRY_BASE_MS = 30_000;
const RETRY_MAX_MS = 3_600_000;
/** A retry never waits longer than this share of the time the credentials have left, so several fit before they expire. */
const RETRY_SHARE_OF_TIME_LEFT = 0.25;

/**
 * The mark a failed renewal of `host` leaves: one more attempt, tried again after a backoff that
 * doubles per attempt and always leaves room for more tries before the credentials run out. A host
 * that did not answer or did not come back is never given up on while its credentials are valid.
 */
export function retryMark(host: HostExpiry, reason: string, now: number): RenewalMark {
  const attempts = (host.renewal?.attempts ?? 0) + 1;
  const backoff = Math.min(RETRY_BASE_MS * 2 ** (attempts - 1), RETRY_MAX_MS);
  const timeLeft = Math.max(0, host.credentials.expiresAt - now);
  return { attempts, retryAt: now + Math.min(backoff, timeLeft * RETRY_SHARE_OF_TIME_LEFT), reason, at: now };
}

/**
 * Whether renewal is for this host at all: any host with credentials, except a quarantined one
 * (two machines answer as it: docs/audit.md) and one a worker is
 * provisioning right now (a claim that ran out with no outcome is no worker's: renewal takes it).
 * What counts is the credentials the node was given, not what the registry
 * last did with the host: a host admitted again that turned out to be configured (a stale event,
 * an operator's forced reprovision) still has them, and would expire if renewal passed it by.
 */
export function renewalApplies(host: HostExpiry): boolean {
  if (host.state === "quarantined") return false;
  return host.state !== "provisioning" || host.abandoned === true;
}

/** A host renewal may send now: renewal applies, not in flight, not expired, and not waiting for a retry. */
function sendable(host: HostExpiry, state: RenewalState, now: number): boolean {
  if (!renewalApplies(host) || state.inFlight[host.identity]) return false;
  return host.credentials.expiresAt > now && (host.renewal === undefined || host.renewal.retryAt <= now);
}

const soonestFirst = (a: HostExpiry, b: HostExpiry) => a.credentials.expiresAt - b.credentials.expiresAt || (a.identity < b.identity ? -1 : 1);

/**
 * The hosts due now, soonest expiry first: sendable (a node whose credentials ran out cannot be
 * reached on the main broker; status shows it) and past the time `renewableAt` gives them.
 */
export function dueHosts(hosts: readonly HostExpiry[], state: RenewalState, before: RenewBefore, now: number): HostExpiry[] {
  return hosts.filter((host) => sendable(host, state, now) && renewableAt(host, before) <= now).sort(soonestFirst);
}

/**
 * The sendable hosts whose renewal window has opened, placed in it or not, soonest expiry first:
 * inside a maintenance window, those that cannot wait for the next one are sent before their place.
 */
export function openedHosts(hosts: readonly HostExpiry[], state: RenewalState, before: RenewBefore, now: number): HostExpiry[] {
  return hosts.filter((host) => sendable(host, state, now) && host.credentials.expiresAt - windowOf(host, before) <= now).sort(soonestFirst);
}

/**
 * The hosts an operator's request still covers (provisioned, not expired, credentials issued before
 * the leader took the request, selected) and, of those, the ones to send now in the order they go:
 * named hosts in the order named, the others soonest expiry first.
 */
export function requestedHosts(hosts: readonly HostExpiry[], state: RenewalState, request: RenewalRequest, now: number): { remaining: number; sendable: HostExpiry[] } {
  const since = request.acceptedAt ?? request.requestedAt;
  const { selection } = request;
  const selected = (host: HostExpiry) =>
    "all" in selection ? true : "dueWithinMs" in selection ? host.credentials.expiresAt <= request.requestedAt + selection.dueWithinMs : true;
  let covered = hosts.filter((host) => renewalApplies(host) && host.credentials.expiresAt > now && host.credentials.issuedAt <= since && selected(host));
  if ("identities" in selection) {
    const byIdentity = new Map(covered.map((host) => [host.identity, host]));
    covered = [...new Set(selection.identities)].flatMap((identity) => byIdentity.get(identity) ?? []);
  } else covered.sort(soonestFirst);
  return { remaining: covered.length, sendable: covered.filter((host) => sendable(host, state, now)) };
}

/** What an operator can do for a host whose credentials expired, by which credential ran out. */
const EXPIRED_HOST_ACTION: Record<HostExpiry["credentials"]["kind"], string> = {
  server_jwt:
    "restart the node's Choria server: go-choria 0.30.0 and later go back to provisioning mode at start when their server JWT has expired, and are provisioned again",
  certificate:
    "re-enrol the node: with an expired certificate it cannot reach the main broker; put it back in provisioning mode (its provisioning configuration) and restart it",
};

/** The expiry distribution status shows, the next hosts due, and the hosts whose credentials ran out. */
interface ExpiryReport {
  /** Hosts whose credentials' expiry is known. */
  known: number;
  expired: number;
  /** Not expired, but in the last quarter of their renewal window: renewal should have renewed them by now. */
  atRisk: number;
  within24h: number;
  within7d: number;
  within30d: number;
  next: Array<{ identity: string; expiresAt: number; kind: HostExpiry["credentials"]["kind"] }>;
  /** The most recently expired hosts, with what to do (at most NEXT_DUE_SHOWN x 5). */
  expiredHosts: Array<{ identity: string; expiredAt: number; kind: HostExpiry["credentials"]["kind"]; action: string }>;
}

const HOUR_MS = 3_600_000;
/** How many of the next hosts due status lists. */
const NEXT_DUE_SHOWN = 10;
/** `renew.before`'s default, for a report made without the deployment's configuration (the CLI without --config). */
const DEFAULT_RENEW_BEFORE: RenewBefore = { fraction: 0.2 };

/** Counts are cumulative: a host expiring in 3 h is within 24 h, 7 d and 30 d. */
function expiryReport(hosts: readonly HostExpiry[], now: number, before: RenewBefore = DEFAULT_RENEW_BEFORE): ExpiryReport {
  const report: ExpiryReport = { known: hosts.length, expired: 0, atRisk: 0, within24h: 0, within7d: 0, within30d: 0, next: [], expiredHosts: [] };
  for (const host of hosts) {
    const left = host.credentials.expiresAt - now;
    if (left <= 0) report.expired++;
    else {
      if (atRisk(host, before, now)) report.atRisk++;
      if (left <= 24 * HOUR_MS) report.within24h++;
      if (left <= 7 * 24 * HOUR_MS) report.within7d++;
      if (left <= 30 * 24 * HOUR_MS) report.within30d++;
    }
  }
  report.next = hosts
    .filter((host) => host.credentials.expiresAt > now)
    .sort((a, b) => a.credentials.expiresAt - b.credentials.expiresAt)
    .slice(0, NEXT_DUE_SHOWN)
    .map((host) => ({ identity: host.identity, expiresAt: host.credentials.expiresAt, kind: host.credentials.kind }));
  report.expiredHosts = hosts
    .filter((host) => host.credentials.expiresAt <= now)
    .sort((a, b) => b.credentials.expiresAt - a.credentials.expiresAt)
    .slice(0, NEXT_DUE_SHOWN * 5)
    .map(({ identity, credentials: { expiresAt, kind } }) => ({ identity, expiredAt: expiresAt, kind, action: EXPIRED_HOST_ACTION[kind] }));
  return report;
}

/** What status shows of renewal: the expiry distribution, and whether renewal is paused, what is in flight and what failed. */
export interface RenewalReport {
  expiry: ExpiryReport;
  paused?: { reason: string; at: number };
  inFlight: number;
  /** Hosts whose last renewal failed and that are tried again at `retryAt`, newest failure first (at most NEXT_DUE_SHOWN x 5). */
  failed: Array<{ identity: string; reason: string; at: number; attempts: number; retryAt: number }>;
  /** Hosts whose renewal failed, in all. */
  failing: number;
  /** The operator's request still being carried out. */
  requested?: { term: number; remaining: number; requestedAt: number; by?: string };
  /** The leader's last renew run, and, when none ran lately, why nothing carries out a request. */
  runs: { last?: { at: number; term: number }; missing?: string };
  /** The wave under way: its rate now (slow start ramps it) and its first attempts and failures (the abort rule's sample). */
  wave?: { startedAt: number; ratePerMinute: number; attempts: number; failures: number };
}

/**
 * How long after the leader's last renew run the runs count as stopped: they come every minute, a
 * failover leaves no leader for about the lease's expiry plus skew_bound plus rpc_ttl, and the
 * operator's clock may differ from the leader's.
 */
const RENEW_RUNS_STOPPED_AFTER_MS = 5 * 60_000;

/**
 * Why nothing carries out an operator's renewal request on the site now, or undefined when a
 * leader's renew run was seen lately. The run's own mark is the truthful signal: the renew function
 * runs only where `renew.broker_urls` names a main broker (elsewhere it answers `not-configured`,
 * and the local stack does not schedule it), and the operator's CLI has no other view of that.
 */
export function renewRunsMissing(state: Pick<RenewalState, "lastRun">, site: string, now: number): string | undefined {
  const last = state.lastRun;
  if (!last) {
    return `no renew run has been seen on site "${site}": the leader's renew function carries out requests, and it runs only where renew.broker_urls names the main broker`;
  }
  const ago = now - last.at;
  if (ago <= RENEW_RUNS_STOPPED_AFTER_MS) return undefined;
  return (
    `the last renew run on site "${site}" was ${Math.round(ago / 60_000)} minutes ago (term ${last.term}): ` +
    "the renew function is not running (renew.broker_urls removed, its schedule disabled, or it fails: see its logs)"
  );
}

const withMissing = (missing: string | undefined) => (missing === undefined ? {} : { missing });

export function renewalReport(
  hosts: readonly HostExpiry[],
  state: RenewalState,
  site: string,
  now: number,
  before: RenewBefore = DEFAULT_RENEW_BEFORE,
): RenewalReport {
  const marked = hosts.filter((host) => host.renewal !== undefined && host.credentials.expiresAt > now);
  const failed = marked
    .map(({ identity, renewal }) => ({ identity, reason: renewal!.reason, at: renewal!.at, attempts: renewal!.attempts, retryAt: renewal!.retryAt }))
    .sort((a, b) => b.at - a.at)
    .slice(0, NEXT_DUE_SHOWN * 5);
  const { request } = state;
  const remaining = request ? requestedHosts(hosts, state, request, now).remaining : 0;
  return {
    expiry: expiryReport(hosts, now, before),
    ...(state.paused ? { paused: state.paused } : {}),
    inFlight: Object.keys(state.inFlight).length,
    failed,
    failing: marked.length,
    ...(request ? { requested: { term: request.term, remaining, requestedAt: request.requestedAt, ...(request.by ? { by: request.by } : {}) } } : {}),
    runs: { ...(state.lastRun ? { last: state.lastRun } : {}), ...withMissing(renewRunsMissing(state, site, now)) },
    ...(state.wave ? { wave: { startedAt: state.wave.startedAt, ratePerMinute: state.wave.ratePerMinute, attempts: state.wave.attempts, failures: state.wave.failures } } : {}),
  };
}
