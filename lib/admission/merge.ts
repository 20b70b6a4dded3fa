/**
 * Merging one site's host registries into one (a site deployed before its deployments shared an
 * admission table has one registry per deployment; docs/deploy.md, "Merging per-deployment
 * registries"): per host, which stored entry the site keeps and what is written for it. The rule
 * decides on the few attributes it reads (the credentials' issue time and expiry, the claim, how
 * long the item is kept) and carries every other attribute as stored, unread, so attributes this
 * code does not know (a newer release's) are never dropped. Pure: the store is in lib/aws.
 */
import { CREDENTIAL_ATTRIBUTES, RENEWAL_ATTRIBUTES } from "../ports/admission-entry";

/** Which credentials a host has and renewal's marks on them travel together. */
const TRAVELLING_WITH_CREDENTIALS = [...CREDENTIAL_ATTRIBUTES, ...RENEWAL_ATTRIBUTES];

/**
 * One host's entry as a table stores it: every attribute, with `V` the store's own value type
 * (opaque here), and what the rule reads of them, decoded by the store.
 */
export interface StoredHost<V> {
  identity: string;
  attributes: Readonly<Record<string, V>>;
  /** Known only whole (an expiry and its kind), as the registry reads it; `issuedAt` is missing on entries older than it. */
  credentials?: { expiresAt: number; issuedAt?: number };
  /** Epoch ms until which the store keeps the item (its `expiresAt`; the TTL follows it). */
  keptUntil: number;
  /** Epoch ms a worker's claim on the host lasts, while it holds one. */
  claimedUntil?: number;
}

/** What the merge does with one host of a source. */
export type HostMergeAction = "copy" | "keep" | "replace" | "fill-expiry";

export type HostMergeReason =
  /** The target has no entry for the host. */
  | "absent"
  /** The source's credentials were issued later (or the target's issue time is not known). */
  | "source-issued-later"
  /** The target's credentials were issued later, or at the same time (the target is kept on a tie). */
  | "target-issued-later"
  | "same-issue"
  /** The target's entry carries no credentials and the source's does: its expiry is filled in. */
  | "target-has-no-expiry"
  /** The source's credentials are later, but a worker is provisioning the host in the target now: its entry stays, with the source's expiry. */
  | "target-claimed";

export interface HostMergeDecision<V> {
  action: HostMergeAction;
  reason: HostMergeReason;
  /** The entry to store in the target; absent when it is kept as it is. */
  write?: StoredHost<V>;
}

export interface HostMergeOptions {
  /** Epoch ms, for whether a claim still lasts. */
  now: number;
  /** The attributes that decide how long the store keeps an item (`expiresAt` and the TTL attribute), carried with an expiry. */
  lifetimeAttributes: readonly string[];
}

/**
 * The rule, for a host of a source and the target's entry for it (undefined when it has none):
 * - absent in the target: the source's entry is copied as it is;
 * - otherwise the entry whose credentials were issued later wins whole (one with a known issue
 *   time beats one without); on a tie the target's is kept;
 * - the kept entry never loses an expiry the other knows: a target entry without credentials
 *   takes the source's (a tie: the source's were recorded before issue times were);
 * - a target entry a worker holds a live claim on is never replaced (the worker's own writes are
 *   conditional on its claim and would fail, and it is about to record newer credentials still):
 *   it takes the source's later credentials instead.
 */
export function decideHostMerge<V>(source: StoredHost<V>, target: StoredHost<V> | undefined, options: HostMergeOptions): HostMergeDecision<V> {
  if (target === undefined) return { action: "copy", reason: "absent", write: source };
  const order = issueRank(source) - issueRank(target);
  if (order > 0) {
    const claimed = target.claimedUntil !== undefined && target.claimedUntil > options.now;
    if (!claimed) return { action: "replace", reason: "source-issued-later", write: source };
    return { action: "fill-expiry", reason: "target-claimed", write: withExpiryOf(target, source, options.lifetimeAttributes) };
  }
  if (target.credentials === undefined && source.credentials !== undefined) {
    return { action: "fill-expiry", reason: "target-has-no-expiry", write: withExpiryOf(target, source, options.lifetimeAttributes) };
  }
  return { action: "keep", reason: order < 0 ? "target-issued-later" : "same-issue" };
}

/** Later issue first; an entry without a known issue time ranks below every entry with one. */
function issueRank(host: StoredHost<unknown>): number {
  return host.credentials?.issuedAt ?? Number.NEGATIVE_INFINITY;
}

/**
 * `kept` with the credential attributes of `from` in place of its own, and kept in the store at
 * least as long as `from` was, so the store's TTL cannot delete the expiry before it is due.
 */
function withExpiryOf<V>(kept: StoredHost<V>, from: StoredHost<V>, lifetimeAttributes: readonly string[]): StoredHost<V> {
  const attributes: Record<string, V> = { ...kept.attributes };
  for (const name of TRAVELLING_WITH_CREDENTIALS) {
    const value = from.attributes[name];
    if (value === undefined) delete attributes[name];
    else attributes[name] = value;
  }
  const longer = from.keptUntil > kept.keptUntil;
  if (longer) {
    for (const name of lifetimeAttributes) {
      const value = from.attributes[name];
      if (value !== undefined) attributes[name] = value;
    }
  }
  return {
    ...kept,
    attributes,
    keptUntil: longer ? from.keptUntil : kept.keptUntil,
    ...(from.credentials ? { credentials: from.credentials } : {}),
  };
}
