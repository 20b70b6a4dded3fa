/** A host's admission entry: its states, its key and fields, and the groups of fields the stores write together. */
import type { AdmissionSource } from "./host-work";
import type { ExpiryKind } from "./credentials";

export type AdmissionState = "queued" | "provisioning" | "provisioned" | "failed" | "parked" | "quarantined";

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
  /** The issuance ledger's id of these credentials (lib/ports/issuance-ledger.ts): `history` marks that record live. */
  credentialId?: string;
  /**
   * Renewal's record of these credentials' failed renewals: how many, when to try again, and the
   * last reason. Kept on the host so every deployment of the site sees it; it ends with the
   * credentials it was written for (a provisioning that records new ones removes it).
   */
  renewalAttempts?: number;
  renewalRetryAt?: number;
  renewalError?: string;
  renewalErrorAt?: number;
  /**
   * The provisioning JWT the node last presented, when it was authentic and expires: its issuer and
   * expiry (`ProvisioningJwtExpiry`). Written with the end of a provisioning or a failure, kept until the next one says otherwise.
   */
  provisioningJwtIssuer?: string;
  provisioningJwtExpiresAt?: number;
  /**
   * Set while the host is quarantined (docs/audit.md): why, the evidence (a JSON text of bounded
   * length naming each sender by fingerprints, never a secret) and when. Removed by the operator's release.
   */
  quarantineReason?: string;
  quarantineEvidence?: string;
  quarantinedAt?: number;
}

/** An entry's record of its failed attempts, kept across re-admission until the host is provisioned. */
export const FAILURE_ATTRIBUTES = ["lastError", "lastErrorAt", "failedStep", "failures"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/** The credentials a provisioned host was given: kept until it is provisioned anew. */
export const CREDENTIAL_ATTRIBUTES = ["credentialsExpireAt", "expiryKind", "credentialsIssuedAt", "credentialId"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/** Renewal's marks on those credentials (`RenewalMark`): they end with the credentials. */
export const RENEWAL_ATTRIBUTES = ["renewalAttempts", "renewalRetryAt", "renewalError", "renewalErrorAt"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/** A quarantine's record on the host: written together, removed together by the operator's release. */
export const QUARANTINE_ATTRIBUTES = ["quarantineReason", "quarantineEvidence", "quarantinedAt"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;
/**
 * What the operator's forget removes from a host with recorded credentials, which it keeps (failed,
 * so admissible at once) instead of deleting: the node may be in service on those credentials.
 */
export const FORGOTTEN_WITH_CREDENTIALS = ["claimToken", "claimedUntil", "heldUntil", ...FAILURE_ATTRIBUTES] as const satisfies ReadonlyArray<keyof AdmissionEntry>;

/** The node's provisioning JWT as it presented it (the bootstrap expiry forecast, docs/audit.md). */
const PROVISIONING_JWT_ATTRIBUTES = ["provisioningJwtIssuer", "provisioningJwtExpiresAt"] as const satisfies ReadonlyArray<keyof AdmissionEntry>;

/** The fields of an entry the registry summary, renewal and status read: what listing a site returns. */
export const SUMMARY_ATTRIBUTES = ["identity", "term", "state", "claimedUntil", ...FAILURE_ATTRIBUTES, ...CREDENTIAL_ATTRIBUTES, ...RENEWAL_ATTRIBUTES, ...PROVISIONING_JWT_ATTRIBUTES, ...QUARANTINE_ATTRIBUTES] as const;

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
  credentialId: true,
  renewalAttempts: true,
  renewalRetryAt: true,
  renewalError: true,
  renewalErrorAt: true,
  provisioningJwtIssuer: true,
  provisioningJwtExpiresAt: true,
  quarantineReason: true,
  quarantineEvidence: true,
  quarantinedAt: true,
};
/** What a store may hold of a host besides its key. */
export const ENTRY_ATTRIBUTES = Object.keys(ENTRY_FIELDS) as ReadonlyArray<keyof typeof ENTRY_FIELDS>;
