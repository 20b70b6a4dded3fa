/** Settling a conditional admission write whose answer was lost or ambiguous, and giving back a claim whose outcome stayed unknown. */
import { messageOf } from "../errors";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import { endedBy } from "./claim";
import type { AdmissionEntry } from "../ports/admission-entry";
import { AdmissionStoreError, type AdmissionStore, type AdmissionWrite } from "../ports/admission-store";
import type { ClaimRequest } from "../ports/admission-store";

/** Times a write that ends a claim is sent again when it was lost on its way and the claim is still ours. */
const SETTLE_RESENDS = 3;

/** Give-back and void rounds for a claim whose outcome is unknown; each round is two writes. */
const ABANDON_ROUNDS = 3;

/** An applied write, carrying the stored entry when there is one (a claim reads its failure record from it). */
function appliedAs(current: AdmissionEntry | undefined): AdmissionWrite {
  return current ? { applied: true, entry: current } : { applied: true };
}

/** What settling a write needs: the store, the site whose entry it writes, the clock and where to log. */
export interface SettleDeps {
  store: AdmissionStore;
  site: string;
  clock: Clock;
  logger: Logger;
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
export async function settle(
  deps: SettleDeps,
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
      deps.logger.warn(`admission ${action} outcome unknown, settling with a consistent read`, { identity, error: messageOf(writeError) });
      let current: AdmissionEntry | undefined;
      try {
        current = await deps.store.read({ site: deps.site, identity });
      } catch (readError) {
        throw new AdmissionStoreError(`could not ${action} host ${identity}: the admission store failed`, { cause: readError });
      }
      if (landed(current)) return appliedAs(current);
      if (resends < SETTLE_RESENDS && mayResend(current)) continue;
      return { applied: false, current };
    }
    if (result.applied || !landed(result.current)) return result;
    deps.logger.info(`admission ${action} had already been applied by an earlier attempt of the same write`, { identity });
    return appliedAs(result.current);
  }
}

/**
 * A claim whose outcome could not be settled may still be applied later (a store answers a
 * request its client gave up on). Either it holds the host now and is given back, or its token
 * is voided so that a late copy cannot take the host; whichever write wins, the other is
 * retried, so the host is never left behind a claim nobody works on.
 */
export async function abandonUnsettledClaim(deps: SettleDeps, request: ClaimRequest): Promise<void> {
  const key = { site: request.site, identity: request.identity, claimToken: request.claimToken };
  try {
    for (let round = 0; round < ABANDON_ROUNDS; round++) {
      const released = await deps.store.releaseClaim({
        ...key,
        lastError: "the outcome of a claim could not be settled",
        lastErrorAt: deps.clock.now(),
      });
      if (released.applied || endedBy(released.current, request.claimToken, "queued")) return;
      const voided = await deps.store.voidClaim(key);
      // Applied, or no entry left to claim: a late copy of the claim cannot land.
      if (voided.applied || voided.current === undefined) return;
      // The late claim landed between the two writes: give it back in the next round.
    }
    throw new AdmissionStoreError(`the claim on host ${request.identity} kept landing while it was given back`);
  } catch (error) {
    deps.logger.warn("could not give back a claim whose outcome is unknown; it runs out on its own", {
      identity: request.identity,
      claimedUntil: request.claimedUntil,
      error: messageOf(error),
    });
  }
}
