/** A worker's claim on a host, what beginning one can come to, and the rules that read a stored entry against a claim. */
import type { HostWork } from "../ports/host-work";
import type { AdmissionEntry, AdmissionState } from "../ports/admission-entry";
import type { ClaimRequest } from "../ports/admission-store";

export interface HostClaim {
  work: HostWork;
  token: string;
  claimedUntil: number;
  /** The host's hard failures in a row before this attempt, when there were any. */
  previousFailure?: { step: string; count: number };
  /** True when the host had recorded credentials when claimed: what it is given now renews them (the ledger's `renewal`). */
  renewing?: boolean;
}

/** The hard failures in a row at `step` once this attempt failed there too. */
export function failuresInARow(claim: HostClaim, step: string): number {
  return claim.previousFailure?.step === step ? claim.previousFailure.count + 1 : 1;
}

export type BeginOutcome =
  | { status: "claimed"; claim: HostClaim }
  | { status: "stale-term" | "not-current" | "waited-too-long" | "already-claimed" | "already-provisioned" };

/** Whether `request` would claim the stored entry: what the store checks, on the entry as read. */
export function claimableBy(current: AdmissionEntry | undefined, request: ClaimRequest): boolean {
  return (
    current !== undefined &&
    current.term === request.term &&
    current.admittedAt === request.admittedAt &&
    current.state !== "provisioned" &&
    current.state !== "quarantined" &&
    (current.claimedUntil === undefined || current.claimedUntil <= request.now) &&
    current.endedClaimToken !== request.claimToken
  );
}

/** The stored entry still carries this claim: a write ending it has not landed and may be sent again. */
export function holdsClaim(current: AdmissionEntry | undefined, claimToken: string): boolean {
  return current?.claimToken === claimToken;
}

/** Whether the stored entry shows the end of `claimToken`'s claim recorded with `state`. */
export function endedBy(current: AdmissionEntry | undefined, claimToken: string, state: AdmissionState): boolean {
  return current?.endedClaimToken === claimToken && current.state === state;
}
