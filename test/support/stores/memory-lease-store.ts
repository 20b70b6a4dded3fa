/**
 * An in-process LeaseStore with the same conditions as the DynamoDB one: for unit tests, the
 * randomized interleaving test and the simulation. Each operation is atomic because
 * it runs without awaiting.
 */
import { extensionOf } from "../../../lib/lease/stored-lease";
import type { AnnounceRequest, ConditionalWrite, ExtendRequest, HolderBounds, LeaseItem, LeaseStore, PeerRequest, ReleaseRequest, ClaimRequest } from "../../../lib/ports/lease-store";

export class MemoryLeaseStore implements LeaseStore {
  private readonly items = new Map<string, LeaseItem>();

  async claim(request: ClaimRequest): Promise<ConditionalWrite> {
    return this.applyClaim(request);
  }

  async extend(request: ExtendRequest): Promise<ConditionalWrite> {
    return this.applyExtend(request);
  }

  async release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.applyRelease(request);
  }

  async markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.applyMarkAnnounced(request);
  }

  async recordPeer(request: PeerRequest): Promise<void> {
    this.applyRecordPeer(request);
  }

  async read(site: string): Promise<LeaseItem | undefined> {
    return this.snapshot(site);
  }

  /** The synchronous forms, for callers that model the network around an atomic store. */
  applyClaim({ site, holder, expiresAt, expiredBefore, waitedHorizonMs, ...bounds }: ClaimRequest): ConditionalWrite {
    const current = this.items.get(site);
    if (current && (current.expiresAt >= expiredBefore || (current.deliveryHorizonMs ?? 0) > waitedHorizonMs)) return { applied: false, current: copy(current) };
    const item: LeaseItem = { site, holder, expiresAt, term: (current?.term ?? 0) + 1, peers: { ...current?.peers } };
    if (current?.announcedTerm !== undefined) item.announcedTerm = current.announcedTerm;
    writeBounds(item, holder, bounds);
    this.items.set(site, item);
    return { applied: true, item: copy(item) };
  }

  applyExtend(request: ExtendRequest): ConditionalWrite {
    const current = this.items.get(request.site);
    const extended = current && extensionOf(current, request);
    if (!current || !extended) return { applied: false, current: current && copy(current) };
    current.expiresAt = extended.expiresAt;
    writeBounds(current, request.holder, { ...request, deliveryHorizonMs: extended.deliveryHorizonMs });
    return { applied: true, item: copy(current) };
  }

  applyRecordPeer({ site, deployment, seenAt }: PeerRequest): void {
    const current = this.items.get(site);
    if (current) current.peers = { ...current.peers, [deployment]: seenAt };
  }

  applyRelease({ site, holder, term }: ReleaseRequest): ConditionalWrite {
    const current = this.items.get(site);
    if (!current || current.holder !== holder || current.term !== term) return { applied: false, current: current && copy(current) };
    current.released = true;
    return { applied: true, item: copy(current) };
  }

  applyMarkAnnounced({ site, holder, term }: AnnounceRequest): ConditionalWrite {
    const current = this.items.get(site);
    if (!current || current.holder !== holder || current.term !== term || (current.announcedTerm ?? 0) >= term) {
      return { applied: false, current: current && copy(current) };
    }
    current.announcedTerm = term;
    return { applied: true, item: copy(current) };
  }

  snapshot(site: string): LeaseItem | undefined {
    const item = this.items.get(site);
    return item && copy(item);
  }
}

/** A copy the caller may keep: the peers map is not shared with the stored item. */
function copy(item: LeaseItem): LeaseItem {
  return item.peers ? { ...item, peers: { ...item.peers } } : { ...item };
}

function writeBounds(item: LeaseItem, holder: string, { skewBoundMs, deliveryHorizonMs, seenAt }: HolderBounds): void {
  item.skewBoundMs = skewBoundMs;
  item.deliveryHorizonMs = deliveryHorizonMs;
  item.peers = { ...item.peers, [holder]: seenAt };
}
