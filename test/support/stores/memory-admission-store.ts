/**
 * An in-process AdmissionStore with the same conditions as the DynamoDB one: for unit tests, the
 * simulation and the soak. Each operation is atomic because it runs without awaiting.
 */
import type { AdmissionEntry, AdmissionKey, AdmissionSummaryRow } from "../../../lib/ports/admission-entry";
import type { AdmissionStore, AdmissionWrite, AdmitRequest, ForgetQueuedRequest, ForgetRequest, ForgetUnlessClaimedRequest, MarkProvisionedRequest, QuarantineRequest, ReleaseQuarantineRequest, MarkRenewalRequest, RecordCredentialsRequest, RecordFailureRequest, ReleaseClaimRequest, RememberWaitingRequest, VoidClaimRequest, WaitingName, ClaimRequest } from "../../../lib/ports/admission-store";
import { CREDENTIAL_ATTRIBUTES, FAILURE_ATTRIBUTES, FORGOTTEN_WITH_CREDENTIALS, QUARANTINE_ATTRIBUTES, RENEWAL_ATTRIBUTES, SUMMARY_ATTRIBUTES } from "../../../lib/ports/admission-entry";
import type { ProvisioningJwtExpiry } from "../../../lib/ports/credentials";

const KEPT_BY_ADMISSION = [...FAILURE_ATTRIBUTES, ...CREDENTIAL_ATTRIBUTES, ...RENEWAL_ATTRIBUTES, "provisioningJwtIssuer", "provisioningJwtExpiresAt"] as const;

export class MemoryAdmissionStore implements AdmissionStore {
  private readonly entries = new Map<string, AdmissionEntry>();
  /** Per site, apart from the entries, as the DynamoDB store keeps them in a partition of their own. */
  private readonly waiting = new Map<string, WaitingName[]>();

  async admit({ entry, blockIfAdmittedAfter, now }: AdmitRequest): Promise<AdmissionWrite> {
    const current = this.get(entry);
    const admissible =
      current === undefined ||
      (current.admissionId !== entry.admissionId &&
        current.state !== "quarantined" &&
        ((current.state === "parked" && (current.heldUntil ?? 0) <= now) ||
          (current.state !== "parked" &&
            (current.state === "failed" ||
              current.term < entry.term ||
              (current.term === entry.term &&
                current.admittedAt <= blockIfAdmittedAfter &&
                (current.claimedUntil === undefined || current.claimedUntil <= now) &&
                (current.heldUntil === undefined || current.heldUntil <= now))))));
    if (!admissible) return { applied: false, current: copy(current) };
    // As DynamoDB's UpdateItem: the failure record, the credentials the node still has, renewal's marks on them and the presented provisioning JWT stay.
    const kept = current && Object.fromEntries(KEPT_BY_ADMISSION.map((field) => [field, current[field]]));
    this.entries.set(keyOf(entry), withoutUndefined({ ...kept, ...entry }));
    return { applied: true };
  }

  async claim(request: ClaimRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    const claimable =
      current !== undefined &&
      current.term === request.term &&
      current.admittedAt === request.admittedAt &&
      current.state !== "provisioned" &&
      current.state !== "quarantined" &&
      (current.claimedUntil === undefined || current.claimedUntil <= request.now) &&
      current.endedClaimToken !== request.claimToken;
    if (!claimable) return { applied: false, current: copy(current) };
    Object.assign(current, {
      state: "provisioning",
      claimToken: request.claimToken,
      claimedUntil: request.claimedUntil,
      expiresAt: Math.max(current.expiresAt, request.expiresAt),
    });
    return { applied: true, entry: { ...current } };
  }

  async markProvisioned(request: MarkProvisionedRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimToken !== request.claimToken) return { applied: false, current: copy(current) };
    for (const field of ["claimToken", "claimedUntil", ...FAILURE_ATTRIBUTES] as const) delete current[field];
    for (const field of [...CREDENTIAL_ATTRIBUTES, ...RENEWAL_ATTRIBUTES]) delete current[field];
    Object.assign(current, { state: "provisioned", heldUntil: request.heldUntil, expiresAt: request.expiresAt, endedClaimToken: request.claimToken });
    if (request.credentials) {
      const { expiresAt, kind, issuedAt, credentialId } = request.credentials;
      Object.assign(current, { credentialsExpireAt: expiresAt, expiryKind: kind, credentialsIssuedAt: issuedAt, ...(credentialId === undefined ? {} : { credentialId }) });
    }
    recordProvisioningJwt(current, request.provisioningJwt);
    return { applied: true };
  }

  async recordCredentials(request: RecordCredentialsRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimToken !== request.claimToken) return { applied: false, current: copy(current) };
    for (const field of [...RENEWAL_ATTRIBUTES, "credentialId"] as const) delete current[field];
    const { expiresAt, kind, issuedAt, credentialId } = request.credentials;
    Object.assign(current, { credentialsExpireAt: expiresAt, expiryKind: kind, credentialsIssuedAt: issuedAt, ...(credentialId === undefined ? {} : { credentialId }), expiresAt: Math.max(current.expiresAt, request.expiresAt) });
    return { applied: true };
  }

  async markRenewal(request: MarkRenewalRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current === undefined || current.credentialsIssuedAt !== request.credentialsIssuedAt) return { applied: false, current: copy(current) };
    for (const field of RENEWAL_ATTRIBUTES) delete current[field];
    const { mark } = request;
    if (mark) Object.assign(current, { renewalAttempts: mark.attempts, renewalRetryAt: mark.retryAt, renewalError: mark.reason, renewalErrorAt: mark.at });
    return { applied: true };
  }

  async quarantine(request: QuarantineRequest): Promise<AdmissionWrite> {
    const { site, identity, term, source, at, reason, evidence, expiresAt } = request;
    const current = this.get(request);
    const kept: Partial<AdmissionEntry> = current ? { ...current } : {};
    for (const field of ["claimToken", "claimedUntil", "heldUntil", "admissionId"] as const) delete kept[field];
    const quarantined = { state: "quarantined" as const, term, admittedAt: at, source, quarantineReason: reason, quarantineEvidence: evidence, quarantinedAt: at, expiresAt };
    this.entries.set(keyOf(request), { ...kept, site, identity, ...quarantined });
    return { applied: true };
  }

  async releaseQuarantine(request: ReleaseQuarantineRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.state !== "quarantined" || current.quarantinedAt !== request.quarantinedAt) return { applied: false, current: copy(current) };
    return this.deleteUnlessCredentials(request, current, { set: { expiresAt: request.expiresAt }, remove: QUARANTINE_ATTRIBUTES });
  }

  async forget(request: ForgetRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimToken !== request.claimToken) return { applied: false, current: copy(current) };
    return this.deleteUnlessCredentials(request, current, { set: { endedClaimToken: request.claimToken }, remove: ["claimToken", "claimedUntil"] });
  }

  async recordFailure(request: RecordFailureRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimToken !== request.claimToken) return { applied: false, current: copy(current) };
    delete current.claimToken;
    delete current.claimedUntil;
    delete current.heldUntil;
    const { state, failedStep, failures, lastError, lastErrorAt, heldUntil, expiresAt } = request;
    Object.assign(
      current,
      { state, failedStep, failures, lastError, lastErrorAt, expiresAt, endedClaimToken: request.claimToken },
      heldUntil === undefined ? {} : { heldUntil },
    );
    recordProvisioningJwt(current, request.provisioningJwt);
    return { applied: true };
  }

  async releaseClaim(request: ReleaseClaimRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimToken !== request.claimToken) return { applied: false, current: copy(current) };
    delete current.claimToken;
    delete current.claimedUntil;
    Object.assign(current, { state: "queued", lastError: request.lastError, lastErrorAt: request.lastErrorAt, endedClaimToken: request.claimToken });
    return { applied: true };
  }

  async voidClaim(request: VoidClaimRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current === undefined || current.claimToken === request.claimToken) return { applied: false, current: copy(current) };
    current.endedClaimToken = request.claimToken;
    return { applied: true };
  }

  async forgetQueued(request: ForgetQueuedRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    const queued =
      current !== undefined &&
      current.term === request.term &&
      current.admittedAt === request.admittedAt &&
      current.claimToken === undefined;
    if (!queued) return { applied: false, current: copy(current) };
    return this.deleteUnlessCredentials(request, current, {});
  }

  async forgetUnlessClaimed(request: ForgetUnlessClaimedRequest): Promise<AdmissionWrite> {
    const current = this.get(request);
    if (current?.claimedUntil !== undefined && current.claimedUntil > request.now) return { applied: false, current: copy(current) };
    return this.deleteUnlessCredentials(request, current, { remove: FORGOTTEN_WITH_CREDENTIALS });
  }

  /** In identity order, as a DynamoDB Query returns the partition. */
  async listSite(site: string): Promise<AdmissionSummaryRow[]> {
    const entries = [...this.entries.values()].filter((entry) => entry.site === site);
    entries.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
    return entries.map(summaryRow);
  }

  async read(key: AdmissionKey): Promise<AdmissionEntry | undefined> {
    return copy(this.get(key));
  }

  async readWaiting(site: string): Promise<WaitingName[]> {
    return (this.waiting.get(site) ?? []).map((name) => ({ ...name }));
  }

  async rememberWaiting({ site, names }: RememberWaitingRequest): Promise<void> {
    if (names.length === 0) this.waiting.delete(site);
    else this.waiting.set(site, names.map((name) => ({ ...name })));
  }

  /**
   * Deletes the entry unless it has recorded credentials: the node may be in service on them, so the
   * entry is kept, failed, for renewal, with `kept` written to it (as the DynamoDB store's forgets).
   */
  private deleteUnlessCredentials(key: AdmissionKey, current: AdmissionEntry | undefined, kept: { set?: Partial<AdmissionEntry>; remove?: ReadonlyArray<(typeof FORGOTTEN_WITH_CREDENTIALS)[number] | (typeof QUARANTINE_ATTRIBUTES)[number]> }): AdmissionWrite {
    if (current?.credentialsExpireAt === undefined) {
      this.entries.delete(keyOf(key));
      return { applied: true };
    }
    for (const field of kept.remove ?? []) delete current[field];
    Object.assign(current, { state: "failed", ...kept.set });
    return { applied: true };
  }

  private get(key: AdmissionKey): AdmissionEntry | undefined {
    return this.entries.get(keyOf(key));
  }
}

function keyOf({ site, identity }: AdmissionKey): string {
  return JSON.stringify([site, identity]);
}

/** A field loop rather than object spreads: listing a 100,000-host site is a hot path of the simulations. */
function summaryRow(entry: AdmissionEntry): AdmissionSummaryRow {
  const row: Record<string, unknown> = {};
  for (const field of SUMMARY_ATTRIBUTES) if (entry[field] !== undefined) row[field] = entry[field];
  return row as unknown as AdmissionSummaryRow;
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

function copy(entry: AdmissionEntry | undefined): AdmissionEntry | undefined {
  return entry && { ...entry };
}

/** As the DynamoDB store writes it: recorded when given, the one before kept when not. */
function recordProvisioningJwt(entry: AdmissionEntry, presented: ProvisioningJwtExpiry | undefined): void {
  if (presented) Object.assign(entry, { provisioningJwtIssuer: presented.issuer, provisioningJwtExpiresAt: presented.expiresAt });
}
