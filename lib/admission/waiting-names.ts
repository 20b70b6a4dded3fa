/** The waiting-names memory: which names a discovery left waiting a site keeps, how long, and within what size. */
import type { Clock } from "../ports/clock";
import { EXPIRY_SLACK_MS, type AdmissionSettings } from "./settings";
import { AdmissionStoreError, type AdmissionStore, type WaitingName } from "../ports/admission-store";

/** A waiting name no discovery saw for this many intervals is forgotten. */
const WAITING_KEPT_INTERVALS = 3;
/** The names waiting are one DynamoDB item, which holds at most 400 KB. */
const WAITING_MAX_BYTES = 256 * 1024;
/** What one waiting name costs in the item besides its UTF-8 bytes: its two times and the list's framing, rounded up. */
const WAITING_ENTRY_OVERHEAD_BYTES = 32;

/** The site and discovery interval the waiting names are kept for. */
type WaitingSettings = Pick<AdmissionSettings, "site" | "intervalMs">;

/**
 * The names earlier discoveries of this site left waiting, as remembered (most deserving first).
 * A name no discovery has seen for WAITING_KEPT_INTERVALS intervals is forgotten: its node is gone,
 * or it was made up.
 */
export async function readWaitingNames(store: AdmissionStore, settings: WaitingSettings, clock: Clock): Promise<WaitingName[]> {
  let names: WaitingName[];
  try {
    names = await store.readWaiting(settings.site);
  } catch (error) {
    throw new AdmissionStoreError(`could not read the names waiting for discovery of site ${settings.site}`, { cause: error });
  }
  const forgetBefore = clock.now() - WAITING_KEPT_INTERVALS * settings.intervalMs;
  return names.filter((name) => name.lastSeen >= forgetBefore);
}

/**
 * Remembers `names`, most deserving first, as this site's names waiting for discovery, in place of
 * the ones before. Stale names are left out, and the list is cut to WAITING_MAX_BYTES so that it
 * stays one item of the admission table however long the names a flood makes up.
 */
export async function rememberWaitingNames(store: AdmissionStore, settings: WaitingSettings, clock: Clock, names: readonly WaitingName[]): Promise<void> {
  const now = clock.now();
  const kept = fitWaiting(names, now - WAITING_KEPT_INTERVALS * settings.intervalMs);
  const expiresAt = now + WAITING_KEPT_INTERVALS * settings.intervalMs + EXPIRY_SLACK_MS;
  try {
    await store.rememberWaiting({ site: settings.site, names: kept, expiresAt });
  } catch (error) {
    throw new AdmissionStoreError(`could not remember the names waiting for discovery of site ${settings.site}`, { cause: error });
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
