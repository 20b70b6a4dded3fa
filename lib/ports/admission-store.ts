/** The AdmissionStore port: the conditional writes and reads of admission entries, their requests, and the store's errors. */
import { ProvisionerError } from "../errors";
import type { HostWork } from "./host-work";
import type { CredentialsExpiry, ProvisioningJwtExpiry, RenewalMark } from "./credentials";
import type { AdmissionEntry, AdmissionKey, AdmissionSummaryRow } from "./admission-entry";

export interface AdmitRequest {
  entry: AdmissionEntry & { state: "queued"; admissionId: string };
  /** An entry of the same term admitted after this still blocks. */
  blockIfAdmittedAfter: number;
  now: number;
}

export interface ClaimRequest extends AdmissionKey {
  term: number;
  admittedAt: number;
  claimToken: string;
  claimedUntil: number;
  now: number;
  expiresAt: number;
}

export interface MarkProvisionedRequest extends AdmissionKey {
  claimToken: string;
  heldUntil: number;
  expiresAt: number;
  /** Recorded when given, removed when not (the host's new credentials do not expire, or are not known). */
  credentials?: CredentialsExpiry;
  /** The provisioning JWT the node presented: recorded when given, the one recorded before kept when not. */
  provisioningJwt?: ProvisioningJwtExpiry;
}

/** The credentials a claimed host is about to be given (AdmissionRegistry.recordCredentials). */
export interface RecordCredentialsRequest extends AdmissionKey {
  claimToken: string;
  credentials: CredentialsExpiry;
  /** The entry is kept at least this long: past the credentials' expiry, so status can say they expired. */
  expiresAt: number;
}

export interface MarkRenewalRequest extends AdmissionKey {
  /** The credentials the mark is about: it applies only while the host still has them. */
  credentialsIssuedAt: number;
  /** Removed when absent. */
  mark?: RenewalMark;
}

/** A host held back because two machines answer as it, or its name cannot be unique (AdmissionRegistry.quarantine). */
export interface QuarantineRequest extends AdmissionKey {
  /** The term and source the quarantine was decided under; `at` stands for the admission time. */
  term: number;
  source: AdmissionEntry["source"];
  at: number;
  reason: string;
  evidence: string;
  expiresAt: number;
}

/** The operator's release of the quarantine written at `quarantinedAt`. */
export interface ReleaseQuarantineRequest extends AdmissionKey {
  quarantinedAt: number;
  /** Kept until then when the host has recorded credentials (the entry stays, failed, for renewal); else it is deleted. */
  expiresAt: number;
}

export interface ForgetRequest extends AdmissionKey {
  claimToken: string;
}

export interface RecordFailureRequest extends AdmissionKey {
  claimToken: string;
  state: "failed" | "parked";
  failedStep: string;
  failures: number;
  lastError: string;
  lastErrorAt: number;
  /** Parked only: no admission before this. */
  heldUntil?: number;
  expiresAt: number;
  /** The provisioning JWT the node presented (an expired one fails at step jwt): recorded when given, kept when not. */
  provisioningJwt?: ProvisioningJwtExpiry;
}

export interface ReleaseClaimRequest extends AdmissionKey {
  claimToken: string;
  lastError: string;
  lastErrorAt: number;
}

export interface VoidClaimRequest extends AdmissionKey {
  claimToken: string;
}

export interface ForgetQueuedRequest extends AdmissionKey {
  term: number;
  admittedAt: number;
}

export interface ForgetUnlessClaimedRequest extends AdmissionKey {
  now: number;
}

/**
 * A name a discovery saw but left out over its budget of new names: the site remembers it, so the
 * next discovery admits names seen before first (lib/app/discovery-selection.ts). Epoch ms.
 */
export interface WaitingName {
  identity: string;
  firstSeen: number;
  lastSeen: number;
}

export interface RememberWaitingRequest {
  site: string;
  /** Replaces the site's list; an empty one removes it. */
  names: readonly WaitingName[];
  expiresAt: number;
}

/** `entry` on an applied claim: the entry as claimed (with its failure record). */
export type AdmissionWrite = { applied: true; entry?: AdmissionEntry } | { applied: false; current: AdmissionEntry | undefined };

/**
 * Conditional writes on admission entries. Conditions are evaluated by the store atomically; a
 * failed condition returns the stored entry. Any throw means the outcome is unknown. A failed
 * condition may also be the store client's own retry of a write that had already been applied, so
 * the caller compares the stored entry with what it wrote (AdmissionRegistry does).
 */
export interface AdmissionStore {
  /**
   * Writes `entry` (keeping the stored failure record and last error, dropping any claim, hold or ended claim)
   * if there is no entry; or, never over a quarantined one, unless the stored entry carries this very admission id (a late
   * duplicate of this write must not apply again), the stored one is parked and held only until `now` or earlier; or it
   * is not parked and is failed, or has an older term, or has the same term and was admitted at or
   * before `blockIfAdmittedAfter`, is not claimed past `now`, and is not held past `now`.
   */
  admit(request: AdmitRequest): Promise<AdmissionWrite>;
  /**
   * Claims the entry if its term and admittedAt match, it is neither provisioned nor quarantined, it has no claim
   * that runs past `now`, and this claim token has not already ended on it (a late duplicate of a
   * claim given back must not take the host again). An applied claim returns the entry as claimed.
   */
  claim(request: ClaimRequest): Promise<AdmissionWrite>;
  /**
   * If the claim token matches: state provisioned, claim, failure record and last error removed,
   * held until `heldUntil`, the token kept as `endedClaimToken`; the credentials' expiry recorded
   * when given, removed when not; any renewal mark removed (it was about the old credentials).
   */
  markProvisioned(request: MarkProvisionedRequest): Promise<AdmissionWrite>;
  /** If the claim token matches: the credentials recorded (any renewal mark removed), the entry kept until at least `expiresAt`. */
  recordCredentials(request: RecordCredentialsRequest): Promise<AdmissionWrite>;
  /** If the entry still has credentials issued at `credentialsIssuedAt`: the renewal mark written, or removed when none is given. */
  markRenewal(request: MarkRenewalRequest): Promise<AdmissionWrite>;
  /**
   * Unconditionally: state quarantined with the reason, evidence and time, any claim and hold
   * removed (a worker holding a claim can record nothing more), the credentials and failure record
   * kept. Writing it again only refreshes it.
   */
  quarantine(request: QuarantineRequest): Promise<AdmissionWrite>;
  /**
   * If the entry is quarantined at `quarantinedAt`: delete it; or, when it records credentials,
   * keep it failed (admissible at once) without the quarantine's record.
   */
  releaseQuarantine(request: ReleaseQuarantineRequest): Promise<AdmissionWrite>;
  /**
   * If the claim token matches: delete the entry; or, when it records credentials (the host may be
   * in service on them), keep it failed with them, its claim ended (`endedClaimToken`).
   */
  forget(request: ForgetRequest): Promise<AdmissionWrite>;
  /** If the claim token matches: claim removed (the token kept as `endedClaimToken`); state, failure record, last error and hold as given. */
  recordFailure(request: RecordFailureRequest): Promise<AdmissionWrite>;
  /** If the claim token matches: state queued, claim removed (the token kept as `endedClaimToken`), `lastError` and `lastErrorAt` recorded. */
  releaseClaim(request: ReleaseClaimRequest): Promise<AdmissionWrite>;
  /**
   * If the entry exists and does not hold this claim token: records the token as ended
   * (`endedClaimToken`), so a copy of that claim still on its way to the store can no longer apply.
   */
  voidClaim(request: VoidClaimRequest): Promise<AdmissionWrite>;
  /** If its term and admittedAt match and it has no claim token: delete the entry. */
  forgetQueued(request: ForgetQueuedRequest): Promise<AdmissionWrite>;
  /** Unless it has a claim that runs past `now`: delete the entry (also applied when there is none). */
  forgetUnlessClaimed(request: ForgetUnlessClaimedRequest): Promise<AdmissionWrite>;
  /** Every entry of `site` (eventually consistent), reduced to the fields the summary shows. */
  listSite(site: string): Promise<AdmissionSummaryRow[]>;
  /** Strongly consistent read. */
  read(key: AdmissionKey): Promise<AdmissionEntry | undefined>;
  /**
   * The site's names waiting for discovery, as last written (in that order), or none. They are
   * no host entries: listSite never returns them.
   */
  readWaiting(site: string): Promise<WaitingName[]>;
  /** Replaces the site's names waiting for discovery, unconditionally: only the leader's discovery writes them. */
  rememberWaiting(request: RememberWaitingRequest): Promise<void>;
}

export class AdmissionStoreError extends ProvisionerError {}

/**
 * An admission whose write and settling read both went unanswered: it may still land, and would
 * then hold the host for an interval with no work queued. `resend` sends the very same admission
 * (its id and time) again: it lands then, or meets its own late copy, which the id recognises;
 * either way it returns the work to queue. It throws as admit does when the store still does not answer.
 */
export class AdmissionOutcomeUnknownError extends AdmissionStoreError {
  constructor(
    readonly identity: string,
    cause: AdmissionStoreError,
    readonly resend: () => Promise<HostWork | undefined>,
  ) {
    super(cause.message, { cause: cause.cause ?? cause });
  }
}
