/**
 * What renewal remembers between runs, per site: the hosts it sent `reprovision` and that are not
 * provisioned again yet (in flight), the outcomes of the last renewals, the hosts it gave up on,
 * the sends of the last minute (the rate), whether it paused itself and why, and an operator's
 * pending request. One record, written with a version check so two writers never lose each
 * other's changes. Also the pure rules over it: which hosts are due, in which order.
 */
import type { HostExpiry } from "../admission/registry";
import { RenewalContentionError } from "../errors";

interface InFlightRenewal {
  /** Wall-clock epoch ms the reprovision request was vouched for by the gate. */
  sentAt: number;
  /** The lease term it was sent under. */
  term: number;
  /** When the credentials it replaces expire. */
  expiresAt: number;
}

export interface RenewalOutcome {
  identity: string;
  ok: boolean;
  at: number;
  reason?: string;
}

/** An operator's `choria-provisioner renew`, carried out by the leader's next run under `term`. */
interface RenewalRequest {
  term: number;
  requestedAt: number;
  by?: string;
  /** Hosts still to send, in the order they go. */
  identities: string[];
  /** Sends per minute while the request lasts, instead of `renew.rate`. */
  ratePerMinute?: number;
}

export interface RenewalState {
  inFlight: Record<string, InFlightRenewal>;
  /** The last `failure_window` outcomes, oldest first. */
  recent: RenewalOutcome[];
  /** Hosts renewal gave up on, with why; cleared when the host is provisioned again or the operator asks for it. */
  failed: Record<string, { reason: string; at: number }>;
  /** Epoch ms of the sends of the last minute. */
  sends: number[];
  paused?: { reason: string; at: number };
  request?: RenewalRequest;
}

export function emptyRenewalState(): RenewalState {
  return { inFlight: {}, recent: [], failed: {}, sends: [] };
}

export interface StoredRenewalState {
  state: RenewalState;
  /** 0 when nothing is stored yet. */
  version: number;
}

export interface RenewalStore {
  read(site: string): Promise<StoredRenewalState>;
  /** Stores `state` as version `version + 1` if the stored version is still `version`; false if another writer came first. */
  write(site: string, state: RenewalState, version: number): Promise<boolean>;
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

/** An in-process RenewalStore with the same version check (unit tests, the single-process local run). */
export class MemoryRenewalStore implements RenewalStore {
  private readonly sites = new Map<string, StoredRenewalState>();

  async read(site: string): Promise<StoredRenewalState> {
    const stored = this.sites.get(site);
    return stored ? structuredClone(stored) : { state: emptyRenewalState(), version: 0 };
  }

  async write(site: string, state: RenewalState, version: number): Promise<boolean> {
    if ((this.sites.get(site)?.version ?? 0) !== version) return false;
    this.sites.set(site, { state: structuredClone(state), version: version + 1 });
    return true;
  }
}

/** How long before expiry a host is due: a fixed duration, or a fraction of its credentials' lifetime. */
export type RenewBefore = { ms: number } | { fraction: number };

/** Hosts of one expiry are spread over the first half of their window, so the second half is left for retries and slack. */
const SPREAD_SHARE = 0.5;

/**
 * When `host` may first be renewed. The window opens `before` ahead of expiry; where in its first
 * half the host goes follows from its name, so hosts provisioned together (one expiry) are spread
 * across the window and each one's place is the same on every run.
 */
export function renewableAt(host: HostExpiry, before: RenewBefore): number {
  const { expiresAt, issuedAt } = host.credentials;
  const lead = "ms" in before ? before.ms : before.fraction * Math.max(0, expiresAt - issuedAt);
  return expiresAt - lead + spreadOf(host.identity) * lead * SPREAD_SHARE;
}

/** A stable fraction in [0, 1) from the identity (FNV-1a). */
export function spreadOf(identity: string): number {
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

/**
 * The hosts due now, soonest expiry first: provisioned, not in flight, not given up on since they
 * were last provisioned, not expired already (a node whose credentials ran out cannot be reached on
 * the main broker; status shows it), and past the time `renewableAt` gives them.
 */
export function dueHosts(hosts: readonly HostExpiry[], state: RenewalState, before: RenewBefore, now: number): HostExpiry[] {
  return hosts
    .filter((host) => {
      if (host.state !== "provisioned" || state.inFlight[host.identity]) return false;
      const failed = state.failed[host.identity];
      if (failed && !provisionedSince(host, failed.at)) return false;
      return host.credentials.expiresAt > now && renewableAt(host, before) <= now;
    })
    .sort((a, b) => a.credentials.expiresAt - b.credentials.expiresAt || (a.identity < b.identity ? -1 : 1));
}

/** The expiry distribution status shows, and the next hosts due. */
export interface ExpiryReport {
  /** Hosts whose credentials' expiry is known. */
  known: number;
  expired: number;
  within24h: number;
  within7d: number;
  within30d: number;
  next: Array<{ identity: string; expiresAt: number; kind: HostExpiry["credentials"]["kind"] }>;
}

const HOUR_MS = 3_600_000;
/** How many of the next hosts due status lists. */
const NEXT_DUE_SHOWN = 10;

/** Counts are cumulative: a host expiring in 3 h is within 24 h, 7 d and 30 d. */
export function expiryReport(hosts: readonly HostExpiry[], now: number): ExpiryReport {
  const report: ExpiryReport = { known: hosts.length, expired: 0, within24h: 0, within7d: 0, within30d: 0, next: [] };
  for (const { credentials } of hosts) {
    const left = credentials.expiresAt - now;
    if (left <= 0) report.expired++;
    else {
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
  return report;
}

/** What status shows of renewal: the expiry distribution, and whether renewal is paused, what is in flight and what failed. */
export interface RenewalReport {
  expiry: ExpiryReport;
  paused?: { reason: string; at: number };
  inFlight: number;
  /** Hosts renewal gave up on, newest first (at most NEXT_DUE_SHOWN x 5). */
  failed: Array<{ identity: string; reason: string; at: number }>;
  /** The operator's request still being carried out. */
  requested?: { term: number; remaining: number; requestedAt: number; by?: string };
}

export function renewalReport(hosts: readonly HostExpiry[], state: RenewalState, now: number): RenewalReport {
  const failed = Object.entries(state.failed)
    .map(([identity, mark]) => ({ identity, ...mark }))
    .sort((a, b) => b.at - a.at)
    .slice(0, NEXT_DUE_SHOWN * 5);
  const { request } = state;
  return {
    expiry: expiryReport(hosts, now),
    ...(state.paused ? { paused: state.paused } : {}),
    inFlight: Object.keys(state.inFlight).length,
    failed,
    ...(request
      ? { requested: { term: request.term, remaining: request.identities.length, requestedAt: request.requestedAt, ...(request.by ? { by: request.by } : {}) } }
      : {}),
  };
}
