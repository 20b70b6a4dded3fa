/** What an AdmissionRegistry is made with: its settings and their defaults, what it runs on, and how long entries outlive their rules. */
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { AdmissionStore } from "../ports/admission-store";

export interface AdmissionSettings {
  site: string;
  /** The discovery `interval` (Go: minimum 1 minute). */
  intervalMs: number;
  /** How long a provisioned host stays known (Go: 60 s). */
  provisionedHoldMs?: number;
  /** Longest one provisioning attempt of one host can take; a claim older than this is abandoned. */
  claimTtlMs?: number;
  /** How long a parked host stays out of admission (default 14 days, the DLQ's retention). */
  parkMs?: number;
  /** `provisioning_jwt_warning`: a presented provisioning JWT expiring within this is counted as expiring (default 30 days). */
  provisioningJwtWarningMs?: number;
}

export const ADMISSION_DEFAULTS = { provisionedHoldMs: 60_000, claimTtlMs: 15 * 60_000, parkMs: 14 * 24 * 3_600_000, provisioningJwtWarningMs: 30 * 24 * 3_600_000 } as const;

/** Entries outlive the last rule that reads them by this much, so TTL deletion never races a rule. */
export const EXPIRY_SLACK_MS = 60 * 60_000;
/** A host whose credentials expired stays listed this long after, so status can say so and what to do. */
export const EXPIRED_KEPT_MS = 14 * 24 * 3_600_000;

export interface AdmissionDeps {
  store: AdmissionStore;
  metrics: Metrics;
  clock?: Clock;
  logger?: Logger;
  /** Makes claim tokens and admission ids (random UUIDs unless a test wants them predictable). */
  newClaimToken?: () => string;
}
