/**
 * The host admission registry (docs/behaviour.md §2), the serverless stand-in for the Go daemon's `hosts`
 * map: which hosts were admitted, under which lease term, and which one a worker is provisioning.
 *
 * - A host is admitted at most once per `interval`; an entry from an older term never blocks the
 *   new leader (Go forgets every host when it loses the election).
 * - Work is discarded when its term is not the current one, when a newer admission superseded it,
 *   or when it waited longer than 2 x interval.
 * - A conditional claim with an expiry keeps SQS's at-least-once duplicates from provisioning one
 *   host twice at once; a crashed claimer's claim runs out.
 * - A provisioned host stays known for 60 s; a failed one may be admitted again at once.
 * - A host that failed at the same step `failureLimit` times in a row is parked: its work goes to
 *   the dead-letter queue with the last error (the app does that) and no discovery or event admits
 *   it again until the operator requeues it or the park runs out. The failure count survives
 *   re-admission and is cleared by a success or by the operator forgetting the host.
 *
 * - A claim given back for a retry keeps the admission and records why, for the status report.
 * - An admission whose work never reached the queue is withdrawn, so the host is admitted again.
 * - The operator may forget a host at any time except while a worker provisions it.
 *
 * A provisioned host costs three writes: admit, claim, mark provisioned.
 */
import { randomUUID } from "node:crypto";
import { waitedTooLong } from "../engine/waiting";
import { messageOf, ProvisionerError } from "../errors";
import { EXTRA_METRIC, silentLogger, systemClock, type AdmissionSource, type Clock, type HostWork, type Logger, type Metrics } from "../ports";

export type AdmissionState = "queued" | "provisioning" | "provisioned" | "failed" | "parked";

export interface AdmissionKey {
  site: string;
  identity: string;
}

export interface AdmissionEntry extends AdmissionKey {
  term: number;
  /** Wall-clock epoch ms. */
  admittedAt: number;
  source: AdmissionSource;
  state: AdmissionState;
  /** Written by each admission and kept by every later write: tells an admitter its own admission apart. */
  admissionId?: string;
  claimToken?: string;
  claimedUntil?: number;
  heldUntil?: number;
  /**
   * The claim whose end (provisioned, failure or give-back) was recorded last: a writer whose
   * answer was lost, or whose SDK retry failed the condition its first attempt had satisfied,
   * recognises its own write by it once the claim token itself is gone.
   */
  endedClaimToken?: string;
  /** Why the last attempt failed; kept across re-admission until the host is provisioned. */
  lastError?: string;
  lastErrorAt?: number;
  /** The step of the last hard failure, and how many hard failures in a row happened at it. */
  failedStep?: string;
  failures?: number;
  /** Epoch ms after which the entry no longer matters to any rule; the store may delete it (TTL). */
  expiresAt: number;
  /** Set when the host was provisioned with credentials that expire: when the first of them does, which one, and when they were issued. */
  credentialsExpireAt?: number;
  expiryKind?: ExpiryKind;
  credentialsIssuedAt?: number;
  /**
   * Renewal's record of these credentials' failed renewals: how many, when to try again, and the
   * last reason. Kept on the host so every deployment of the site sees it; it ends with the
   * credentials it was written for (a provisioning that records new ones removes it).
   */
  renewalAttempts?: number;
  renewalRetryAt?: number;
  renewalError?: string;
  renewalErrorAt?: number;
}

/** Which credential of a provisioned host expires first: the helper's x509 certificate or the server JWT we signed. */
type ExpiryKind = "certificate" | "server_jwt";

/** When a provisioned host's credentials stop working (epoch ms), which one that is, and when they were issued. */
export interface CredentialsExpiry {
  expiresAt: number;
  kind: ExpiryKind;
  issuedAt: number;
}

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
}

/** The credentials a claimed host is about to be given (AdmissionRegistry.recordCredentials). */
export interface RecordCredentialsRequest extends AdmissionKey {
  claimToken: string;
  credentials: CredentialsExpiry;
  /** The entry is kept at least this long: past the credentials' expiry, so status can say they expired. */
  expiresAt: number;
}

/** Failed renewals of one host's credentials: how many in a row, the next try, the last reason and when. */
export interface RenewalMark {
  attempts: number;
  retryAt: number;
  reason: string;
  at: number;
}

export interface MarkRenewalRequest extends AdmissionKey {
  /** The credentials the mark is about: it applies only while the host still has them. */
  credentialsIssuedAt: number;
  /** Removed when absent. */
  mark?: RenewalMark;
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

/** An entry's record of its failed attempts, kept across re-admission until the host is provisioned. */
export const FAILURE_ATTRIBUTES = ["lastError", "lastErrorAt", "failedStep", "failures"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/** The credentials a provisioned host was given: kept until it is provisioned anew. */
export const CREDENTIAL_ATTRIBUTES = ["credentialsExpireAt", "expiryKind", "credentialsIssuedAt"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/** Renewal's marks on those credentials (`RenewalMark`): they end with the credentials. */
export const RENEWAL_ATTRIBUTES = ["renewalAttempts", "renewalRetryAt", "renewalError", "renewalErrorAt"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/**
 * What the operator's forget removes from a host with recorded credentials, which it keeps (failed,
 * so admissible at once) instead of deleting: the node may be in service on those credentials.
 */
export const FORGOTTEN_WITH_CREDENTIALS = ["claimToken", "claimedUntil", "heldUntil", ...FAILURE_ATTRIBUTES] as const satisfies ReadonlyArray<keyof AdmissionEntry>;

/** The fields of an entry the registry summary, renewal and status read: what listing a site returns. */
export const SUMMARY_ATTRIBUTES = ["identity", "term", "state", "claimedUntil", ...FAILURE_ATTRIBUTES, ...CREDENTIAL_ATTRIBUTES, ...RENEWAL_ATTRIBUTES] as const;

export type AdmissionSummaryRow = Pick<AdmissionEntry, (typeof SUMMARY_ATTRIBUTES)[number]>;

/** Every field of an entry besides its key, as a record so that the compiler says when one is left out. */
const ENTRY_FIELDS: Record<Exclude<keyof AdmissionEntry, keyof AdmissionKey>, true> = {
  term: true,
  admittedAt: true,
  source: true,
  state: true,
  admissionId: true,
  claimToken: true,
  claimedUntil: true,
  heldUntil: true,
  endedClaimToken: true,
  lastError: true,
  lastErrorAt: true,
  failedStep: true,
  failures: true,
  expiresAt: true,
  credentialsExpireAt: true,
  expiryKind: true,
  credentialsIssuedAt: true,
  renewalAttempts: true,
  renewalRetryAt: true,
  renewalError: true,
  renewalErrorAt: true,
};
/** What a store may hold of a host besides its key. */
export const ENTRY_ATTRIBUTES = Object.keys(ENTRY_FIELDS) as ReadonlyArray<keyof typeof ENTRY_FIELDS>;

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

export interface RegistrySummary {
  total: number;
  byState: Record<AdmissionState, number>;
  /** Hosts whose last attempt failed (retrying, failed or parked), with the reason; newest first. */
  lastErrors: Array<{ identity: string; term: number; state: AdmissionState; lastError: string; lastErrorAt: number; failedStep?: string; failures?: number }>;
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
   * if there is no entry; or, unless the stored entry carries this very admission id (a late
   * duplicate of this write must not apply again), the stored one is parked and held only until `now` or earlier; or it
   * is not parked and is failed, or has an older term, or has the same term and was admitted at or
   * before `blockIfAdmittedAfter`, is not claimed past `now`, and is not held past `now`.
   */
  admit(request: AdmitRequest): Promise<AdmissionWrite>;
  /**
   * Claims the entry if its term and admittedAt match, it is not provisioned, it has no claim
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
}

const ADMISSION_DEFAULTS = { provisionedHoldMs: 60_000, claimTtlMs: 15 * 60_000, parkMs: 14 * 24 * 3_600_000 } as const;

/** Keeps the status report small however many hosts keep failing. */
const LAST_ERRORS_SHOWN = 50;
/** A failure reason is recorded up to this length. */
const LAST_ERROR_MAX_LENGTH = 1_000;

/** Times a write that ends a claim is sent again when it was lost on its way and the claim is still ours. */
const SETTLE_RESENDS = 3;

/** Give-back and void rounds for a claim whose outcome is unknown; each round is two writes. */
const ABANDON_ROUNDS = 3;

/** Entries outlive the last rule that reads them by this much, so TTL deletion never races a rule. */
const EXPIRY_SLACK_MS = 60 * 60_000;
/** A host whose credentials expired stays listed this long after, so status can say so and what to do. */
const EXPIRED_KEPT_MS = 14 * 24 * 3_600_000;

/** A waiting name no discovery saw for this many intervals is forgotten. */
const WAITING_KEPT_INTERVALS = 3;
/** The names waiting are one DynamoDB item, which holds at most 400 KB. */
const WAITING_MAX_BYTES = 256 * 1024;
/** What one waiting name costs in the item besides its UTF-8 bytes: its two times and the list's framing, rounded up. */
const WAITING_ENTRY_OVERHEAD_BYTES = 32;

export interface HostClaim {
  work: HostWork;
  token: string;
  claimedUntil: number;
  /** The host's hard failures in a row before this attempt, when there were any. */
  previousFailure?: { step: string; count: number };
}

/** The hard failures in a row at `step` once this attempt failed there too. */
export function failuresInARow(claim: HostClaim, step: string): number {
  return claim.previousFailure?.step === step ? claim.previousFailure.count + 1 : 1;
}

export type BeginOutcome =
  | { status: "claimed"; claim: HostClaim }
  | { status: "stale-term" | "not-current" | "waited-too-long" | "already-claimed" | "already-provisioned" };

export interface AdmissionDeps {
  store: AdmissionStore;
  metrics: Metrics;
  clock?: Clock;
  logger?: Logger;
  /** Makes claim tokens and admission ids (random UUIDs unless a test wants them predictable). */
  newClaimToken?: () => string;
}

export class AdmissionRegistry {
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly holdMs: number;
  private readonly claimTtlMs: number;

  constructor(
    private readonly settings: AdmissionSettings,
    private readonly deps: AdmissionDeps,
  ) {
    this.clock = deps.clock ?? systemClock;
    this.logger = deps.logger ?? silentLogger;
    this.holdMs = settings.provisionedHoldMs ?? ADMISSION_DEFAULTS.provisionedHoldMs;
    this.claimTtlMs = settings.claimTtlMs ?? ADMISSION_DEFAULTS.claimTtlMs;
  }

  /** Admits `identity` under `term`; returns the work to enqueue, or undefined when it was admitted recently. */
  async admit(identity: string, source: AdmissionSource, term: number): Promise<HostWork | undefined> {
    // Host-work messages carry admittedAt as an integer; a fractional clock would make them poison.
    const now = Math.floor(this.clock.now());
    // Term and admittedAt do not single out this admission: a concurrent admitter may write the same pair.
    const admissionId = this.newToken();
    const entry = {
      site: this.settings.site,
      identity,
      term,
      admittedAt: now,
      source,
      state: "queued" as const,
      admissionId,
      expiresAt: now + 2 * this.settings.intervalMs + EXPIRY_SLACK_MS,
    };
    const request = { entry, blockIfAdmittedAfter: now - this.settings.intervalMs, now };
    const send = () =>
      this.settle(
        "admit",
        identity,
        () => this.deps.store.admit(request),
        (current) => current?.admissionId === admissionId,
      );
    // A write that threw and was read as not applied may still land, and would then hold the host
    // for an interval with no work queued. The store answered the read, so sending the same admission
    // once more is cheap and settles it: it lands now, or fails on our own late copy, which settle
    // recognises by the admission id. When the store did not answer at all, the error goes up at once
    // (the invocation's time is bounded) as AdmissionOutcomeUnknownError, whose caller may send the
    // same admission again once it knows it has the time (AdmissionFlow does).
    const attempt = async (): Promise<HostWork | undefined> => {
      let result = await send();
      // No entry at all: the write threw and the read came before it landed (a condition never fails on no entry).
      if (!result.applied && result.current === undefined) result = await send();
      if (!result.applied) {
        this.logger.debug("host admitted recently, not admitting it again", { identity, term, admittedAt: result.current?.admittedAt });
        return undefined;
      }
      return { identity, term, admittedAt: now, source };
    };
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof AdmissionStoreError)) throw error;
      throw new AdmissionOutcomeUnknownError(identity, error, attempt);
    }
  }

  /**
   * The worker's check before provisioning (Go `isCurrent` plus the waiting limit), then the
   * claim. Only a "claimed" outcome may be provisioned; every discarded outcome is logged and
   * counted here, so callers only act on the status.
   */
  async begin(work: HostWork, currentTerm: number): Promise<BeginOutcome> {
    const { identity } = work;
    if (work.term !== currentTerm) {
      this.discardStale(work, `it was admitted under lease term ${work.term} but the current term is ${currentTerm}`);
      return { status: "stale-term" };
    }
    const now = this.clock.now();
    const waited = waitedTooLong(work.admittedAt, now, this.settings.intervalMs);
    if (waited) {
      this.deps.metrics.count(EXTRA_METRIC.staleWorkDiscarded);
      this.logger.error(waited, { identity, term: work.term });
      return { status: "waited-too-long" };
    }
    const token = this.newToken();
    const claimedUntil = now + this.claimTtlMs;
    const request = {
      site: this.settings.site,
      identity,
      term: work.term,
      admittedAt: work.admittedAt,
      claimToken: token,
      claimedUntil,
      now,
      expiresAt: claimedUntil + EXPIRY_SLACK_MS,
    };
    const claimOnce = () =>
      this.settle(
        "claim",
        identity,
        () => this.deps.store.claim(request),
        (current) => current?.claimToken === token,
      );
    let result: AdmissionWrite;
    try {
      result = await claimOnce();
      // Claimable, yet not ours: the write threw and the read found it not (yet) applied. It may
      // still land late and leave a claim nobody works on, so send the same claim again: it either
      // lands now or fails on our own late one, which settle recognises.
      if (!result.applied && claimableBy(result.current, request)) result = await claimOnce();
      if (!result.applied && claimableBy(result.current, request)) {
        throw new AdmissionStoreError(`could not claim host ${identity}: the outcome of the claim stayed unknown`);
      }
    } catch (error) {
      await this.abandonUnsettledClaim(request);
      throw error;
    }
    if (result.applied) {
      const claimed = result.entry;
      const previousFailure =
        claimed?.failedStep !== undefined && (claimed.failures ?? 0) > 0 ? { step: claimed.failedStep, count: claimed.failures ?? 0 } : undefined;
      return { status: "claimed", claim: { work, token, claimedUntil, ...(previousFailure ? { previousFailure } : {}) } };
    }

    const current = result.current;
    if (!current || current.term !== work.term || current.admittedAt !== work.admittedAt) {
      this.discardStale(work, "the host is no longer current (forgotten or admitted again since)");
      return { status: "not-current" };
    }
    if (current.state === "provisioned") {
      this.deps.metrics.count(EXTRA_METRIC.staleWorkDiscarded);
      this.logger.info("host already provisioned, skipping duplicate work", { identity, term: work.term });
      return { status: "already-provisioned" };
    }
    this.logger.info("host is being provisioned by another worker, skipping duplicate work", { identity, term: work.term });
    return { status: "already-claimed" };
  }

  /**
   * Records the end of a claimed provisioning: keep a provisioned host for the hold time, forget a
   * failed one (one with recorded credentials stays, failed, so renewal keeps it in sight).
   */
  async complete(claim: HostClaim, outcome: "provisioned" | "failed", credentials?: CredentialsExpiry): Promise<void> {
    const key = { site: this.settings.site, identity: claim.work.identity };
    const heldUntil = this.clock.now() + this.holdMs;
    // A host whose credentials expire stays in the registry until they do, so renewal can find it,
    // and for a while after, so status reports it expired instead of forgetting it.
    const expiresAt = Math.max(heldUntil + EXPIRY_SLACK_MS, credentials ? credentials.expiresAt + EXPIRED_KEPT_MS : 0);
    const result = await this.settle(
      outcome === "provisioned" ? "mark provisioned" : "forget",
      key.identity,
      () =>
        outcome === "provisioned"
          ? this.deps.store.markProvisioned({ ...key, claimToken: claim.token, heldUntil, expiresAt, ...(credentials ? { credentials } : {}) })
          : this.deps.store.forget({ ...key, claimToken: claim.token }),
      (current) => (outcome === "provisioned" ? endedBy(current, claim.token, "provisioned") : current === undefined || endedBy(current, claim.token, "failed")),
      (current) => holdsClaim(current, claim.token),
    );
    if (!result.applied) {
      this.logger.warn("the claim on this host ran out before the provisioning finished", {
        identity: key.identity,
        outcome,
        claimedUntil: claim.claimedUntil,
      });
    }
  }

  /**
   * Records the credentials a claimed host is about to be configured with, before the configure
   * request leaves. A worker that dies after the node took them (a crash, a freeze past the
   * invocation's deadline) records no outcome, and the node, now on the main broker, is never
   * discovered again: without this record renewal would never learn its credentials and would let
   * them expire in service. False when the claim is no longer ours (nothing may be sent then).
   */
  async recordCredentials(claim: HostClaim, credentials: CredentialsExpiry): Promise<boolean> {
    const request: RecordCredentialsRequest = {
      site: this.settings.site,
      identity: claim.work.identity,
      claimToken: claim.token,
      credentials,
      // Never sooner than the claim's own entry would go: credentials may be shorter-lived than a claim.
      expiresAt: Math.max(claim.claimedUntil + EXPIRY_SLACK_MS, credentials.expiresAt + EXPIRED_KEPT_MS),
    };
    const result = await this.settle(
      "record the credentials of",
      claim.work.identity,
      () => this.deps.store.recordCredentials(request),
      (current) => holdsClaim(current, claim.token) && current?.credentialsIssuedAt === credentials.issuedAt,
      (current) => holdsClaim(current, claim.token),
    );
    return result.applied;
  }

  /**
   * Records a hard failure of the claimed attempt at `step`: the host may be admitted again at
   * once (`park` false) or is parked for `parkMs` (the caller has dead-lettered its work). False
   * when the claim had run out.
   */
  async recordFailure(claim: HostClaim, failure: { step: string; reason: string; failures: number; park: boolean }): Promise<boolean> {
    const now = this.clock.now();
    const heldUntil = failure.park ? now + (this.settings.parkMs ?? ADMISSION_DEFAULTS.parkMs) : undefined;
    const state = failure.park ? "parked" : "failed";
    const request: RecordFailureRequest = {
      site: this.settings.site,
      identity: claim.work.identity,
      claimToken: claim.token,
      state,
      failedStep: failure.step,
      failures: failure.failures,
      lastError: failure.reason.slice(0, LAST_ERROR_MAX_LENGTH) || "unknown",
      lastErrorAt: now,
      ...(heldUntil === undefined ? {} : { heldUntil }),
      // The failure count must outlive the gap to the next admission (one interval).
      expiresAt: (heldUntil ?? now + 2 * this.settings.intervalMs) + EXPIRY_SLACK_MS,
    };
    const result = await this.settle(
      "record the failure of",
      claim.work.identity,
      () => this.deps.store.recordFailure(request),
      (current) => endedBy(current, claim.token, state),
      (current) => holdsClaim(current, claim.token),
    );
    return result.applied;
  }

  /**
   * Gives `claim` back without ending the admission, recording `reason`, so a redelivery of the
   * same work can claim the host again. False when the claim had run out (another worker may hold it).
   */
  async retryLater(claim: HostClaim, reason: string): Promise<boolean> {
    const request = {
      site: this.settings.site,
      identity: claim.work.identity,
      claimToken: claim.token,
      lastError: reason.slice(0, LAST_ERROR_MAX_LENGTH) || "unknown",
      lastErrorAt: this.clock.now(),
    };
    // No state check: a redelivery may have claimed the host again since, keeping our ended claim.
    const result = await this.settle(
      "give back the claim on",
      claim.work.identity,
      () => this.deps.store.releaseClaim(request),
      (current) => current?.endedClaimToken === claim.token,
      (current) => holdsClaim(current, claim.token),
    );
    return result.applied;
  }

  /**
   * Undoes the admission of `work` whose message never reached the queue, so the next discovery or
   * event admits the host again. False when the host was admitted again or claimed since; true
   * when there is no entry (a retried delete finds none, whoever deleted it). A host with recorded
   * credentials is kept, failed, not deleted: it may be in service on them (an event admitted it
   * again after it was provisioned), and renewal must still know them.
   */
  async withdraw(work: HostWork): Promise<boolean> {
    const request = { site: this.settings.site, identity: work.identity, term: work.term, admittedAt: work.admittedAt };
    const kept = (current: AdmissionEntry) =>
      current.credentialsExpireAt !== undefined && current.state === "failed" && current.term === work.term && current.admittedAt === work.admittedAt && current.claimToken === undefined;
    const result = await this.settle(
      "withdraw",
      work.identity,
      () => this.deps.store.forgetQueued(request),
      (current) => current === undefined || kept(current),
    );
    return result.applied;
  }

  /**
   * The operator's override of the once-per-interval rule and the provisioned hold: forgets the
   * host unless a worker holds an unexpired claim on it, in which case it returns false. A host
   * with recorded credentials keeps them (failed, admissible at once): if the operator's attempt
   * fails because the node is in service after all, renewal must still know what it holds.
   */
  async forgetUnlessClaimed(identity: string): Promise<boolean> {
    const request = { site: this.settings.site, identity, now: this.clock.now() };
    const unclaimed = (current: AdmissionEntry | undefined) => current?.claimedUntil === undefined || current.claimedUntil <= request.now;
    const result = await this.settle(
      "forget",
      identity,
      () => this.deps.store.forgetUnlessClaimed(request),
      (current) => current === undefined || (current.credentialsExpireAt !== undefined && current.state === "failed" && current.failures === undefined && unclaimed(current)),
      unclaimed,
    );
    return result.applied;
  }

  /** How many hosts of this site are in each state, and the most recent failures. */
  async summary(): Promise<RegistrySummary> {
    const summary: RegistrySummary = {
      total: 0,
      byState: { queued: 0, provisioning: 0, provisioned: 0, failed: 0, parked: 0 },
      lastErrors: [],
    };
    for (const row of await this.deps.store.listSite(this.settings.site)) {
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
    return summary;
  }

  /**
   * The identities this site's registry holds an entry for, whatever its state: discovery admits
   * these before names it never saw. One query of the site's partition, which holds about the fleet.
   */
  async knownIdentities(): Promise<Set<string>> {
    return new Set((await this.deps.store.listSite(this.settings.site)).map((row) => row.identity));
  }

  /**
   * The names earlier discoveries of this site left waiting, as remembered (most deserving first).
   * A name no discovery has seen for WAITING_KEPT_INTERVALS intervals is forgotten: its node is gone,
   * or it was made up.
   */
  async waitingNames(): Promise<WaitingName[]> {
    let names: WaitingName[];
    try {
      names = await this.deps.store.readWaiting(this.settings.site);
    } catch (error) {
      throw new AdmissionStoreError(`could not read the names waiting for discovery of site ${this.settings.site}`, { cause: error });
    }
    const forgetBefore = this.clock.now() - WAITING_KEPT_INTERVALS * this.settings.intervalMs;
    return names.filter((name) => name.lastSeen >= forgetBefore);
  }

  /**
   * Remembers `names`, most deserving first, as this site's names waiting for discovery, in place of
   * the ones before. Stale names are left out, and the list is cut to WAITING_MAX_BYTES so that it
   * stays one item of the admission table however long the names a flood makes up.
   */
  async rememberWaiting(names: readonly WaitingName[]): Promise<void> {
    const now = this.clock.now();
    const kept = fitWaiting(names, now - WAITING_KEPT_INTERVALS * this.settings.intervalMs);
    const expiresAt = now + WAITING_KEPT_INTERVALS * this.settings.intervalMs + EXPIRY_SLACK_MS;
    try {
      await this.deps.store.rememberWaiting({ site: this.settings.site, names: kept, expiresAt });
    } catch (error) {
      throw new AdmissionStoreError(`could not remember the names waiting for discovery of site ${this.settings.site}`, { cause: error });
    }
  }

  /** Every host of this site whose credentials' expiry is recorded, in no particular order. */
  async expiries(): Promise<HostExpiry[]> {
    const hosts: HostExpiry[] = [];
    const now = this.clock.now();
    for (const row of await this.deps.store.listSite(this.settings.site)) {
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

  /** The host's state as recorded (a consistent read); undefined when the registry holds no entry for it. */
  async stateOf(identity: string): Promise<AdmissionState | undefined> {
    return (await this.deps.store.read({ site: this.settings.site, identity }))?.state;
  }

  /** The credentials the host was last given, as recorded (a consistent read); undefined when none are known. */
  async credentialsOf(identity: string): Promise<CredentialsExpiry | undefined> {
    const entry = await this.deps.store.read({ site: this.settings.site, identity });
    if (entry?.credentialsExpireAt === undefined || entry.expiryKind === undefined) return undefined;
    return { expiresAt: entry.credentialsExpireAt, kind: entry.expiryKind, issuedAt: entry.credentialsIssuedAt ?? 0 };
  }

  /**
   * Records renewal's failed tries of `host`'s current credentials (or clears them, with no mark).
   * False when the host has other credentials by now: the mark was about credentials it no longer has.
   */
  async markRenewal(host: Pick<HostExpiry, "identity" | "credentials">, mark?: RenewalMark): Promise<boolean> {
    const request = { site: this.settings.site, identity: host.identity, credentialsIssuedAt: host.credentials.issuedAt, ...(mark ? { mark } : {}) };
    const result = await this.settle("record a renewal", host.identity, () => this.deps.store.markRenewal(request), (current) =>
      current?.credentialsIssuedAt === host.credentials.issuedAt && current.renewalRetryAt === mark?.retryAt && current.renewalAttempts === mark?.attempts,
    );
    return result.applied;
  }

  private discardStale(work: HostWork, reason: string): void {
    this.deps.metrics.count(EXTRA_METRIC.staleWorkDiscarded);
    this.logger.info(`discarding work for ${work.identity}: ${reason}`, { identity: work.identity, term: work.term, source: work.source });
  }

  /**
   * A claim whose outcome could not be settled may have landed; a redelivery brings a new token and
   * would find the host claimed for `claimTtlMs` by nobody. So give the token's claim back now, if
   * it is there (best effort: the store may still be failing; it also stops a late duplicate of
   * the claim from landing afterwards, since a claim token that ended never claims again).
   */
  /**
   * A claim whose outcome could not be settled may still be applied later (a store answers a
   * request its client gave up on). Either it holds the host now and is given back, or its token
   * is voided so that a late copy cannot take the host; whichever write wins, the other is
   * retried, so the host is never left behind a claim nobody works on.
   */
  private async abandonUnsettledClaim(request: ClaimRequest): Promise<void> {
    const key = { site: request.site, identity: request.identity, claimToken: request.claimToken };
    try {
      for (let round = 0; round < ABANDON_ROUNDS; round++) {
        const released = await this.deps.store.releaseClaim({
          ...key,
          lastError: "the outcome of a claim could not be settled",
          lastErrorAt: this.clock.now(),
        });
        if (released.applied || endedBy(released.current, request.claimToken, "queued")) return;
        const voided = await this.deps.store.voidClaim(key);
        // Applied, or no entry left to claim: a late copy of the claim cannot land.
        if (voided.applied || voided.current === undefined) return;
        // The late claim landed between the two writes: give it back in the next round.
      }
      throw new AdmissionStoreError(`the claim on host ${request.identity} kept landing while it was given back`);
    } catch (error) {
      this.logger.warn("could not give back a claim whose outcome is unknown; it runs out on its own", {
        identity: request.identity,
        claimedUntil: request.claimedUntil,
        error: messageOf(error),
      });
    }
  }

  private newToken(): string {
    return (this.deps.newClaimToken ?? randomUUID)();
  }

  /**
   * One conditional write whose outcome is judged by `landed`, which recognises this write's own
   * effect in the stored entry. A failed condition is checked too: the store client retries a
   * write whose answer was slow or lost, and that retry fails the condition the first attempt
   * satisfied, returning our own effect. A throw means the outcome is unknown, so a consistent
   * read decides; a write it shows did not land, while `mayResend` says the entry still takes it
   * (the claim is still ours), is sent again, up to SETTLE_RESENDS times: a request lost on its way
   * is not a claim that ran out, and dropping it would leave a provisioned host unknown.
   */
  private async settle(
    action: string,
    identity: string,
    write: () => Promise<AdmissionWrite>,
    landed: (current: AdmissionEntry | undefined) => boolean,
    mayResend: (current: AdmissionEntry | undefined) => boolean = () => false,
  ): Promise<AdmissionWrite> {
    for (let resends = 0; ; resends++) {
      let result: AdmissionWrite;
      try {
        result = await write();
      } catch (writeError) {
        this.logger.warn(`admission ${action} outcome unknown, settling with a consistent read`, { identity, error: messageOf(writeError) });
        let current: AdmissionEntry | undefined;
        try {
          current = await this.deps.store.read({ site: this.settings.site, identity });
        } catch (readError) {
          throw new AdmissionStoreError(`could not ${action} host ${identity}: the admission store failed`, { cause: readError });
        }
        if (landed(current)) return appliedAs(current);
        if (resends < SETTLE_RESENDS && mayResend(current)) continue;
        return { applied: false, current };
      }
      if (result.applied || !landed(result.current)) return result;
      this.logger.info(`admission ${action} had already been applied by an earlier attempt of the same write`, { identity });
      return appliedAs(result.current);
    }
  }
}

/** Each name once, none last seen before `forgetBefore`, the first ones up to WAITING_MAX_BYTES. */
function fitWaiting(names: readonly WaitingName[], forgetBefore: number): WaitingName[] {
  const seen = new Set<string>();
  const kept: WaitingName[] = [];
  let bytes = 0;
  for (const name of names) {
    if (name.lastSeen < forgetBefore || seen.has(name.identity)) continue;
    bytes += Buffer.byteLength(name.identity, "utf8") + WAITING_ENTRY_OVERHEAD_BYTES;
    if (bytes > WAITING_MAX_BYTES) break;
    seen.add(name.identity);
    kept.push({ identity: name.identity, firstSeen: name.firstSeen, lastSeen: name.lastSeen });
  }
  return kept;
}

/** An applied write, carrying the stored entry when there is one (a claim reads its failure record from it). */
function appliedAs(current: AdmissionEntry | undefined): AdmissionWrite {
  return current ? { applied: true, entry: current } : { applied: true };
}

/** Whether `request` would claim the stored entry: what the store checks, on the entry as read. */
function claimableBy(current: AdmissionEntry | undefined, request: ClaimRequest): boolean {
  return (
    current !== undefined &&
    current.term === request.term &&
    current.admittedAt === request.admittedAt &&
    current.state !== "provisioned" &&
    (current.claimedUntil === undefined || current.claimedUntil <= request.now) &&
    current.endedClaimToken !== request.claimToken
  );
}

/** Whether the stored entry shows the end of `claimToken`'s claim recorded with `state`. */
/** The stored entry still carries this claim: a write ending it has not landed and may be sent again. */
function holdsClaim(current: AdmissionEntry | undefined, claimToken: string): boolean {
  return current?.claimToken === claimToken;
}

function endedBy(current: AdmissionEntry | undefined, claimToken: string, state: AdmissionState): boolean {
  return current?.endedClaimToken === claimToken && current.state === state;
}
