/** What the registry reads from a site's listing: the summary by state with the latest failures (and their limits), and the hosts whose credentials expire. */
import type { CredentialsExpiry, RenewalMark } from "../ports/credentials";
import type { AdmissionState, AdmissionSummaryRow } from "../ports/admission-entry";
import { QUARANTINED_SHOWN, quarantinedHosts, type QuarantinedHost } from "./quarantine";

/** Keeps the status report small however many hosts keep failing. */
const LAST_ERRORS_SHOWN = 50;
/** A failure reason is recorded up to this length. */
export const LAST_ERROR_MAX_LENGTH = 1_000;

export interface RegistrySummary {
  total: number;
  byState: Record<AdmissionState, number>;
  /** Hosts whose last attempt failed (retrying, failed or parked), with the reason; newest first. */
  lastErrors: Array<{ identity: string; term: number; state: AdmissionState; lastError: string; lastErrorAt: number; failedStep?: string; failures?: number }>;
  /** The provisioning JWTs the listed hosts presented: how many expire within the window, how many had expired. */
  provisioningJwts: ProvisioningJwtForecast;
  /** Quarantined hosts with their evidence, the latest first, at most QUARANTINED_SHOWN (`byState.quarantined` counts them all). */
  quarantined: QuarantinedHost[];
}

/** One issuer's provisioning JWTs, as the hosts of a site's listing presented them. */
interface ProvisioningJwtIssuer {
  /** The tokens' `iss`; "" when they have none. */
  issuer: string;
  /** Hosts whose recorded JWT is of this issuer. */
  hosts: number;
  /** Of them, those whose JWT expires within the window (not expired yet). */
  expiring: number;
  /** Of them, those whose JWT had expired when they presented it or has since: they no longer enrol. */
  expired: number;
  /** The soonest expiry still ahead among them (epoch ms); none when every one has passed. */
  nextExpiresAt?: number;
}

/** The bootstrap expiry forecast (docs/audit.md): per issuer, and the site's totals the gauges carry. */
export interface ProvisioningJwtForecast {
  /** `provisioning_jwt_warning`: a JWT expiring within this much of now is expiring. */
  windowMs: number;
  expiring: number;
  expired: number;
  /** Issuers with an expired JWT first, then by their next expiry, soonest first. */
  issuers: ProvisioningJwtIssuer[];
}

/** A host whose credentials expire, as the registry knows it. */
export interface HostExpiry {
  identity: string;
  state: AdmissionState;
  credentials: CredentialsExpiry;
  /** Failed renewals of these credentials, when there were any. */
  renewal?: RenewalMark;
  /**
   * Claimed for provisioning, and the claim ran out with no outcome recorded: the worker died, maybe
   * after the node took these credentials (recorded before they left), so renewal must not pass it by.
   */
  abandoned?: true;
}

/**
 * The provisioning JWTs the hosts of a site's listing presented, at `now`: one whose expiry is at or
 * before `now` has expired (it is accepted while now < exp), one expiring at or before `now + windowMs` is expiring.
 */
export function provisioningJwtForecast(rows: readonly AdmissionSummaryRow[], now: number, windowMs: number): ProvisioningJwtForecast {
  const byIssuer = new Map<string, ProvisioningJwtIssuer>();
  const forecast: ProvisioningJwtForecast = { windowMs, expiring: 0, expired: 0, issuers: [] };
  for (const { provisioningJwtIssuer: issuer, provisioningJwtExpiresAt: expiresAt } of rows) {
    if (issuer === undefined || expiresAt === undefined) continue;
    let counts = byIssuer.get(issuer);
    if (!counts) byIssuer.set(issuer, (counts = { issuer, hosts: 0, expiring: 0, expired: 0 }));
    counts.hosts++;
    if (expiresAt <= now) {
      counts.expired++;
      forecast.expired++;
      continue;
    }
    if (expiresAt <= now + windowMs) {
      counts.expiring++;
      forecast.expiring++;
    }
    counts.nextExpiresAt = Math.min(counts.nextExpiresAt ?? expiresAt, expiresAt);
  }
  const order = (issuer: ProvisioningJwtIssuer) => (issuer.expired > 0 ? -Infinity : (issuer.nextExpiresAt ?? Infinity));
  forecast.issuers = [...byIssuer.values()].sort((a, b) => order(a) - order(b) || (a.issuer < b.issuer ? -1 : 1));
  return forecast;
}

/** How many hosts of a site's listing are in each state, the most recent failures, and the forecast of their provisioning JWTs (`now`, `windowMs`). */
export function summarize(rows: readonly AdmissionSummaryRow[], now: number, windowMs: number): RegistrySummary {
  const summary: RegistrySummary = {
    total: 0,
    byState: { queued: 0, provisioning: 0, provisioned: 0, failed: 0, parked: 0, quarantined: 0 },
    lastErrors: [],
    provisioningJwts: provisioningJwtForecast(rows, now, windowMs),
    quarantined: [],
  };
  for (const row of rows) {
    summary.total++;
    if (Object.hasOwn(summary.byState, row.state)) summary.byState[row.state]++;
    if (row.lastError) {
      summary.lastErrors.push({
        identity: row.identity,
        term: row.term,
        state: row.state,
        lastError: row.lastError,
        lastErrorAt: row.lastErrorAt ?? 0,
        ...(row.failedStep === undefined ? {} : { failedStep: row.failedStep, failures: row.failures ?? 0 }),
      });
    }
  }
  summary.lastErrors.sort((a, b) => b.lastErrorAt - a.lastErrorAt);
  summary.lastErrors.length = Math.min(summary.lastErrors.length, LAST_ERRORS_SHOWN);
  summary.quarantined = quarantinedHosts(rows).slice(0, QUARANTINED_SHOWN);
  return summary;
}

/** Every host of a site's listing whose credentials' expiry is recorded, in the listing's order; a claim ended by `now` with no outcome is abandoned. */
export function hostExpiries(rows: readonly AdmissionSummaryRow[], now: number): HostExpiry[] {
  const hosts: HostExpiry[] = [];
  for (const row of rows) {
    if (row.credentialsExpireAt === undefined || row.expiryKind === undefined) continue;
    const { renewalAttempts: attempts, renewalRetryAt: retryAt, renewalError: reason, renewalErrorAt: at } = row;
    hosts.push({
      identity: row.identity,
      state: row.state,
      credentials: { expiresAt: row.credentialsExpireAt, kind: row.expiryKind, issuedAt: row.credentialsIssuedAt ?? 0 },
      ...(attempts !== undefined && retryAt !== undefined ? { renewal: { attempts, retryAt, reason: reason ?? "", at: at ?? 0 } } : {}),
      ...(row.state === "provisioning" && (row.claimedUntil ?? 0) <= now ? { abandoned: true as const } : {}),
    });
  }
  return hosts;
}
