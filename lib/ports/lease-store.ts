/** The LeaseStore port: the lease item as stored and the conditional writes a store offers (docs/behaviour.md §5). */

/** The lease item as stored; `expiresAt` is wall-clock epoch ms on the writer's clock. */
export interface LeaseItem {
  site: string;
  holder: string;
  term: number;
  expiresAt: number;
  /**
   * The term whose startup event and immediate discovery have been claimed (the once-per-term
   * marker); below `term` while nobody has announced the current term yet.
   */
  announcedTerm?: number;
  /** The holder gave the term up: it can no longer be extended, only claimed after expiry. */
  released?: boolean;
  /**
   * What a challenger must honour, on top of its own (it waits the larger of each): the skew bound of
   * the holder's last write, and the delivery horizon past `expiresAt`. `expiresAt +
   * deliveryHorizonMs` is the term's delivery deadline: the latest instant (plus skew) at which a
   * request any container of the holder sent under this term may still be executed at a node. No
   * write of a term moves it earlier (see extensionOf); a claim starts it from the winner's own.
   * Absent on items written before they were recorded.
   */
  skewBoundMs?: number;
  deliveryHorizonMs?: number;
  /** Every deployment whose rounds touched this site's lease, with the wall-clock ms (its own clock) of its last round. */
  peers?: Record<string, number>;
}

/** The result of one conditional write: the item after it, or the item that failed the condition. */
export type ConditionalWrite = { applied: true; item: LeaseItem } | { applied: false; current: LeaseItem | undefined };

/** What a holder writes with every claim and extension, so that a challenger can honour it. */
export interface HolderBounds {
  skewBoundMs: number;
  deliveryHorizonMs: number;
  /** Wall-clock ms of this round, recorded as `peers.<holder>`. */
  seenAt: number;
}

export interface ClaimRequest extends HolderBounds {
  site: string;
  holder: string;
  expiresAt: number;
  /** The lease may be taken over only if its stored `expiresAt` is below this. */
  expiredBefore: number;
  /**
   * The delivery horizon `expiredBefore` waited out past the expiry. The claim also fails if the
   * stored horizon is longer: a write since the claimant read the item (it may have read it before
   * a freeze) moved the term's delivery deadline later than it waited for.
   */
  waitedHorizonMs: number;
}

/** A round that writes nothing else records that `deployment` took part, as `peers.<deployment> = seenAt`. */
export interface PeerRequest {
  site: string;
  deployment: string;
  seenAt: number;
}

/** Claims the announcement of `term` (startup event + immediate discovery) for its holder, once. */
export interface AnnounceRequest {
  site: string;
  holder: string;
  term: number;
}

export interface ExtendRequest extends HolderBounds {
  site: string;
  holder: string;
  /** When given, the stored term must equal it; when absent, any term held by `holder` is extended. */
  term?: number;
  expiresAt: number;
}

export interface ReleaseRequest {
  site: string;
  holder: string;
  term: number;
}

/**
 * Conditional writes on the lease item. Implementations throw on any transport or service error;
 * the caller treats every throw as "outcome unknown" and settles it with `read`.
 */
export interface LeaseStore {
  /**
   * If the item is absent, or `expiresAt < expiredBefore` and its delivery horizon is at most
   * `waitedHorizonMs`: set holder, expiry and the claimant's bounds, term + 1 (1 when absent).
   */
  claim(request: ClaimRequest): Promise<ConditionalWrite>;
  /**
   * If holder (and term, when given) match and the term is not released, and the request would
   * raise the stored expiry or the term's delivery deadline: write the lease extensionOf gives.
   * A request the stored lease already covers is not applied (the stored item is returned).
   */
  extend(request: ExtendRequest): Promise<ConditionalWrite>;
  /**
   * If holder and term match: mark the term released (no more extensions). `expiresAt` is kept:
   * other invocations of the holder may still count on it, so a challenger still waits for it.
   */
  release(request: ReleaseRequest): Promise<ConditionalWrite>;
  /** If holder and term match and `announcedTerm` is absent or lower: set `announcedTerm = term`. */
  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite>;
  /** If the item exists: set `peers.<deployment> = seenAt` (nothing else changes). */
  recordPeer(request: PeerRequest): Promise<void>;
  /** Strongly consistent read. */
  read(site: string): Promise<LeaseItem | undefined>;
}
