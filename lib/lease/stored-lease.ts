/**
 * What a stored lease says (docs/behaviour.md §5) outside the election: who leads, for the operator
 * and the lifecycle events; the extension rule both stores apply; how a write whose outcome is
 * unknown is settled; and a release on behalf of a holder. The item and the store's writes are the
 * port (lib/ports/lease-store.ts); the rules that decide when to write are in lease.ts.
 */
import { messageOf, ProvisionerError } from "../errors";
import type { Logger } from "../ports/logger";
import type { ConditionalWrite, ExtendRequest, LeaseItem, LeaseStore } from "../ports/lease-store";
/** What an operator or status report may say about the stored lease, read on this machine's clock. */
export interface LeaseDescription {
  /** The holder, unless the lease is released or was never taken. */
  leader: string | null;
  term: number | null;
  /** The stored expiry of a lease that is held (possibly already past); null when released. */
  expiresAt: number | null;
  heldByThisDeployment: boolean;
}

/**
 * The one reading of a stored lease outside the election itself. A released lease (the `released`
 * flag, or the expiry of 0 that older items carry) has no leader; a held one is this deployment's
 * only while its expiry is ahead on this clock.
 */
export function describeLease(item: LeaseItem | undefined, deploymentId: string, now: number): LeaseDescription {
  const held = isHeld(item);
  return {
    leader: held ? item.holder : null,
    term: item?.term ?? null,
    expiresAt: held ? item.expiresAt : null,
    heldByThisDeployment: leadsAt(item, deploymentId, now),
  };
}

/** A lease someone holds (its expiry may be past): not released, and taken at least once. */
function isHeld(item: LeaseItem | undefined): item is LeaseItem {
  return item !== undefined && item.released !== true && item.expiresAt > 0;
}

/**
 * Whether `deploymentId` leads at wall-clock `now` by the stored lease: it holds it and the expiry,
 * less `skewBoundMs` (another machine's clock may be that far ahead), is still ahead.
 */
export function leadsAt(item: LeaseItem | undefined, deploymentId: string, now: number, skewBoundMs = 0): boolean {
  return isHeld(item) && item.holder === deploymentId && item.expiresAt - skewBoundMs > now;
}
/** The stored lease's timing after an extension: its expiry and the delivery horizon past it. */
export interface ExtendedTiming {
  expiresAt: number;
  deliveryHorizonMs: number;
}

/** Until when (plus skew) a request sent under the item's term may still be executed at a node. */
export function deliveryDeadline(item: LeaseItem): number {
  return item.expiresAt + (item.deliveryHorizonMs ?? 0);
}

/**
 * What `request` makes of the stored lease, the rule both stores apply: undefined when it may not
 * extend it (another holder or term, released) or when the stored lease already covers it (expiry
 * and delivery deadline at least the request's). The expiry becomes the later of the two, and so
 * does the delivery deadline: the containers of one deployment can send with different request
 * TTLs (a rollout that changes `rpc_ttl`), and a request one of them let go may be executed until
 * its own deadline whichever container writes last. The horizon is stored past the new expiry, so
 * once the containers with the longer TTL stop keeping it comes down to the writers' own within
 * that TTL, instead of keeping the longest for as long as the term lasts.
 */
export function extensionOf(stored: LeaseItem, request: ExtendRequest): ExtendedTiming | undefined {
  if (stored.holder !== request.holder || stored.released || (request.term !== undefined && stored.term !== request.term)) return undefined;
  const storedDeadline = deliveryDeadline(stored);
  const requestedDeadline = request.expiresAt + request.deliveryHorizonMs;
  if (request.expiresAt <= stored.expiresAt && requestedDeadline <= storedDeadline) return undefined;
  const expiresAt = Math.max(stored.expiresAt, request.expiresAt);
  return { expiresAt, deliveryHorizonMs: Math.max(storedDeadline, requestedDeadline) - expiresAt };
}

/**
 * Gives up the stored term on behalf of `holder` (a function that never took part in the election,
 * e.g. the operator's release): marks it released if `holder` holds it, keeping the expiry (see
 * Lease.release). `term` when known, else the stored one. `released`: the store confirmed it.
 */
export async function releaseOnBehalf(
  store: Pick<LeaseStore, "read" | "release">,
  request: { site: string; holder: string; term?: number },
): Promise<{ released: boolean; term: number | undefined }> {
  const term = request.term ?? (await store.read(request.site))?.term;
  if (term === undefined) return { released: false, term };
  return { released: (await store.release({ site: request.site, holder: request.holder, term })).applied, term };
}

/** A lease write that this process could not settle; the lease reads as not held. */
class UnsettledWrite extends ProvisionerError {}

/**
 * Runs one write; if it throws, the outcome is unknown, so a consistent read decides: when the
 * stored item is `ours` (it covers what we wrote) it counts as applied, otherwise as not applied.
 */
export async function settledWrite(
  store: Pick<LeaseStore, "read">,
  site: string,
  write: () => Promise<ConditionalWrite>,
  ours: (item: LeaseItem | undefined) => boolean,
  logger: Logger,
): Promise<ConditionalWrite> {
  try {
    return await write();
  } catch (writeError) {
    logger.warn("lease write outcome unknown, settling with a consistent read", { site, error: writeError });
    let current: LeaseItem | undefined;
    try {
      current = await store.read(site);
    } catch (readError) {
      // A chain has one cause: the read's is the cause, the write's is named here, so neither is lost.
      throw new UnsettledWrite(`lease write outcome unknown (${messageOf(writeError)}) and the settling read failed`, { cause: readError });
    }
    return ours(current) ? { applied: true, item: current as LeaseItem } : { applied: false, current };
  }
}
