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
 * A provisioned host costs four writes here (admit, claim, its credentials, mark provisioned) and one
 * in the issuance ledger; docs/behaviour.md §2 says what each pays for.
 */
import { randomUUID } from "node:crypto";
import { waitedTooLong } from "../engine/waiting";
import { EXTRA_METRIC } from "../ports/metric-names";
import { silentLogger, type Logger } from "../ports/logger";
import { systemClock, type Clock } from "../ports/clock";
import type { AdmissionSource, HostWork } from "../ports/host-work";
import { claimableBy, endedBy, holdsClaim, type BeginOutcome, type HostClaim } from "./claim";
import type { CredentialsExpiry, ProvisioningJwtExpiry, RenewalMark } from "../ports/credentials";
import type { AdmissionEntry, AdmissionState } from "../ports/admission-entry";
import { ADMISSION_DEFAULTS, EXPIRED_KEPT_MS, EXPIRY_SLACK_MS, type AdmissionDeps, type AdmissionSettings } from "./settings";
import { abandonUnsettledClaim, settle, type SettleDeps } from "./settle";
import { hostExpiries, LAST_ERROR_MAX_LENGTH, provisioningJwtForecast, summarize, type HostExpiry, type ProvisioningJwtForecast, type RegistrySummary } from "./site-listing";
import { AdmissionOutcomeUnknownError, AdmissionStoreError, type AdmissionWrite, type RecordCredentialsRequest, type RecordFailureRequest, type WaitingName } from "../ports/admission-store";
import { readWaitingNames, rememberWaitingNames } from "./waiting-names";
import { encodeEvidence, QUARANTINE_KEPT_MS, quarantinedHosts, type QuarantinedHost, type QuarantineEvidence } from "./quarantine";

export class AdmissionRegistry {
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly holdMs: number;
  private readonly claimTtlMs: number;
  private readonly settling: SettleDeps;
  /**
   * Per claim, until when its entry must stay in the table because of credentials a node may hold:
   * the host's from before the claim, and any recorded on the claim. A failure recorded later keeps
   * at least that, so the table's expiry never deletes what renewal needs.
   */
  private readonly credentialsKeptUntil = new WeakMap<HostClaim, number>();

  constructor(
    private readonly settings: AdmissionSettings,
    private readonly deps: AdmissionDeps,
  ) {
    this.clock = deps.clock ?? systemClock;
    this.logger = deps.logger ?? silentLogger;
    this.holdMs = settings.provisionedHoldMs ?? ADMISSION_DEFAULTS.provisionedHoldMs;
    this.claimTtlMs = settings.claimTtlMs ?? ADMISSION_DEFAULTS.claimTtlMs;
    this.settling = { store: deps.store, site: settings.site, clock: this.clock, logger: this.logger };
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
      settle(
        this.settling,
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
      settle(
        this.settling,
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
      await abandonUnsettledClaim(this.settling, request);
      throw error;
    }
    if (result.applied) {
      const claimed = result.entry;
      const previousFailure =
        claimed?.failedStep !== undefined && (claimed.failures ?? 0) > 0 ? { step: claimed.failedStep, count: claimed.failures ?? 0 } : undefined;
      const renewing = claimed?.credentialsExpireAt !== undefined;
      const claim: HostClaim = { work, token, claimedUntil, ...(previousFailure ? { previousFailure } : {}), ...(renewing ? { renewing } : {}) };
      if (claimed?.credentialsExpireAt !== undefined) this.credentialsKeptUntil.set(claim, claimed.credentialsExpireAt + EXPIRED_KEPT_MS);
      return { status: "claimed", claim };
    }

    const current = result.current;
    if (current?.state === "quarantined") {
      this.discardStale(work, "the host is quarantined: two machines answer as it, or its name cannot be unique");
      return { status: "not-current" };
    }
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
  async complete(claim: HostClaim, outcome: "provisioned" | "failed", credentials?: CredentialsExpiry, provisioningJwt?: ProvisioningJwtExpiry): Promise<void> {
    const key = { site: this.settings.site, identity: claim.work.identity };
    const heldUntil = this.clock.now() + this.holdMs;
    // A host whose credentials expire stays in the registry until they do, so renewal can find it,
    // and for a while after, so status reports it expired instead of forgetting it.
    const expiresAt = Math.max(heldUntil + EXPIRY_SLACK_MS, credentials ? credentials.expiresAt + EXPIRED_KEPT_MS : 0);
    const result = await settle(
      this.settling,
      outcome === "provisioned" ? "mark provisioned" : "forget",
      key.identity,
      () =>
        outcome === "provisioned"
          ? this.deps.store.markProvisioned({ ...key, claimToken: claim.token, heldUntil, expiresAt, ...(credentials ? { credentials } : {}), ...(provisioningJwt ? { provisioningJwt } : {}) })
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
    const result = await settle(
      this.settling,
      "record the credentials of",
      claim.work.identity,
      () => this.deps.store.recordCredentials(request),
      (current) => holdsClaim(current, claim.token) && current?.credentialsIssuedAt === credentials.issuedAt,
      (current) => holdsClaim(current, claim.token),
    );
    if (result.applied) this.credentialsKeptUntil.set(claim, Math.max(this.credentialsKeptUntil.get(claim) ?? 0, credentials.expiresAt + EXPIRED_KEPT_MS));
    return result.applied;
  }

  /**
   * Records a hard failure of the claimed attempt at `step`: the host may be admitted again at
   * once (`park` false) or is parked for `parkMs` (the caller has dead-lettered its work). With it,
   * the provisioning JWT the node presented, when known (an expired one is why it failed at step jwt).
   * False when the claim had run out.
   */
  async recordFailure(claim: HostClaim, failure: { step: string; reason: string; failures: number; park: boolean; provisioningJwt?: ProvisioningJwtExpiry }): Promise<boolean> {
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
      ...(failure.provisioningJwt ? { provisioningJwt: failure.provisioningJwt } : {}),
      // The failure count must outlive the gap to the next admission (one interval); credentials the
      // node may hold (sent before the failure was seen) outlive both.
      expiresAt: Math.max((heldUntil ?? now + 2 * this.settings.intervalMs) + EXPIRY_SLACK_MS, this.credentialsKeptUntil.get(claim) ?? 0),
    };
    const result = await settle(
      this.settling,
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
    const result = await settle(
      this.settling,
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
    const result = await settle(
      this.settling,
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
    const result = await settle(
      this.settling,
      "forget",
      identity,
      () => this.deps.store.forgetUnlessClaimed(request),
      (current) => current === undefined || (current.credentialsExpireAt !== undefined && current.state === "failed" && current.failures === undefined && unclaimed(current)),
      unclaimed,
    );
    return result.applied;
  }

  /** How many hosts of this site are in each state, the most recent failures, and the forecast of their provisioning JWTs. */
  async summary(): Promise<RegistrySummary> {
    return summarize(await this.deps.store.listSite(this.settings.site), this.clock.now(), this.provisioningJwtWarningMs);
  }

  /**
   * The identities this site's registry holds an entry for, whatever its state (discovery admits
   * these before names it never saw), the quarantined ones among them, which it does not admit, and
   * the forecast of the provisioning JWTs they presented, which discovery reports. One query of the
   * site's partition, which holds about the fleet.
   */
  async siteNames(): Promise<{ known: Set<string>; quarantined: Set<string>; provisioningJwts: ProvisioningJwtForecast }> {
    const rows = await this.deps.store.listSite(this.settings.site);
    return {
      known: new Set(rows.map((row) => row.identity)),
      quarantined: new Set(rows.flatMap((row) => (row.state === "quarantined" ? [row.identity] : []))),
      provisioningJwts: provisioningJwtForecast(rows, this.clock.now(), this.provisioningJwtWarningMs),
    };
  }

  private get provisioningJwtWarningMs(): number {
    return this.settings.provisioningJwtWarningMs ?? ADMISSION_DEFAULTS.provisioningJwtWarningMs;
  }

  /** The site's quarantined hosts with their evidence, the latest first. */
  async quarantined(): Promise<QuarantinedHost[]> {
    return quarantinedHosts(await this.deps.store.listSite(this.settings.site));
  }

  /**
   * Quarantines `identity` (docs/audit.md): held back from admission, claims and renewal on every
   * deployment of the site until the operator releases it; a worker's claim on it ends here.
   */
  async quarantine(identity: string, evidence: QuarantineEvidence, term: number, source: AdmissionSource): Promise<void> {
    const at = Math.floor(this.clock.now());
    const request = {
      site: this.settings.site,
      identity,
      term,
      source,
      at,
      reason: evidence.reason.slice(0, LAST_ERROR_MAX_LENGTH),
      evidence: encodeEvidence(evidence.senders),
      expiresAt: at + QUARANTINE_KEPT_MS,
    };
    const quarantinedNow = (current: AdmissionEntry | undefined) => current?.state === "quarantined" && current.quarantinedAt === at;
    await settle(this.settling, "quarantine", identity, () => this.deps.store.quarantine(request), quarantinedNow, (current) => !quarantinedNow(current));
  }

  /**
   * The operator's release: the host is admissible at once (one with recorded credentials stays,
   * failed, so renewal keeps it in sight). False when it is not quarantined.
   */
  async releaseQuarantine(identity: string): Promise<boolean> {
    const key = { site: this.settings.site, identity };
    const current = await this.deps.store.read(key);
    if (current?.state !== "quarantined" || current.quarantinedAt === undefined) return false;
    const quarantinedAt = current.quarantinedAt;
    const now = this.clock.now();
    const expiresAt = Math.max(now + 2 * this.settings.intervalMs + EXPIRY_SLACK_MS, (current.credentialsExpireAt ?? 0) + EXPIRED_KEPT_MS);
    const result = await settle(
      this.settling,
      "release the quarantine of",
      identity,
      () => this.deps.store.releaseQuarantine({ ...key, quarantinedAt, expiresAt }),
      (stored) => stored?.quarantinedAt !== quarantinedAt,
    );
    return result.applied;
  }

  /** The names earlier discoveries of this site left waiting, as remembered (most deserving first), stale ones forgotten. */
  async waitingNames(): Promise<WaitingName[]> {
    return readWaitingNames(this.deps.store, this.settings, this.clock);
  }

  /** Remembers `names`, most deserving first, as this site's names waiting for discovery, in place of the ones before. */
  async rememberWaiting(names: readonly WaitingName[]): Promise<void> {
    return rememberWaitingNames(this.deps.store, this.settings, this.clock, names);
  }

  /** Every host of this site whose credentials' expiry is recorded, in no particular order. */
  async expiries(): Promise<HostExpiry[]> {
    const now = this.clock.now();
    return hostExpiries(await this.deps.store.listSite(this.settings.site), now);
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
    const result = await settle(this.settling, "record a renewal", host.identity, () => this.deps.store.markRenewal(request), (current) =>
      current?.credentialsIssuedAt === host.credentials.issuedAt && current.renewalRetryAt === mark?.retryAt && current.renewalAttempts === mark?.attempts,
    );
    return result.applied;
  }

  private discardStale(work: HostWork, reason: string): void {
    this.deps.metrics.count(EXTRA_METRIC.staleWorkDiscarded);
    this.logger.info(`discarding work for ${work.identity}: ${reason}`, { identity: work.identity, term: work.term, source: work.source });
  }

  private newToken(): string {
    return (this.deps.newClaimToken ?? randomUUID)();
  }
}
