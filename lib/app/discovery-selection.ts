/**
 * Which discovered names a discovery admits (docs/behaviour.md §5). Any client on the provisioning
 * broker can answer a discovery with made-up names, faster than real nodes answer and as many as it
 * likes, so neither the order replies arrived in nor the number of names one client sends may
 * decide who gets in:
 *
 * - names the registry already knows (admitted before, failed, provisioned) go first, and `cap`
 *   (`discovery_max_nodes`) bounds the total;
 * - then at most `newBudget` (`discovery_new_names_per_interval`) names the registry does not know:
 *   first those an earlier discovery saw and left waiting (the site's memory, kept in the admission
 *   registry), the oldest first-seen first, then the others; within each, in a uniformly random order.
 *
 * A forger making up fresh names each time cannot keep a node out past the second discovery the node
 * answers: the forger's names of the last discovery are not in this one, so the node left waiting is
 * among the few names seen before. A forger repeating its names is one more group seen before, which
 * the budget goes through at random: all of it, and the nodes that arrived with it, are admitted
 * within ceil(names / budget) discoveries. The rest are dropped and counted; what is left waiting is
 * remembered, at most `waitingBound(newBudget)` names.
 */
import type { WaitingName } from "../ports/admission-store";
import type { RandomSource } from "../engine/retry";

export interface DiscoverySelection {
  selected: string[];
  /** Known names left out because the cap was reached. */
  droppedOverCap: number;
  /** New names left out because the budget of new names or the cap was reached. */
  droppedOverBudget: number;
  /** What the site remembers as waiting after this discovery, most deserving first. */
  waiting: WaitingName[];
}

export interface SelectionLimits {
  /** `discovery_max_nodes`. */
  cap: number;
  /** `discovery_new_names_per_interval`. */
  newBudget: number;
}

export interface SelectionMemory {
  /** The names earlier discoveries left waiting; none when they could not be read. */
  waiting: readonly WaitingName[];
  /** Wall-clock epoch ms of this discovery: when a name left waiting now was first or last seen. */
  now: number;
  random: RandomSource;
}

/**
 * A flood of fresh names is remembered whole up to this many, so a node that arrived with it is
 * sure to be among the names seen before next time; past it, a random share of them.
 */
const WAITING_FLOOR = 1_000;

/** The most names the site remembers as waiting: four discoveries' worth of new names, and never fewer than WAITING_FLOOR. */
function waitingBound(newBudget: number): number {
  return Math.max(4 * newBudget, WAITING_FLOOR);
}

export function selectDiscovered(identities: readonly string[], known: ReadonlySet<string>, limits: SelectionLimits, memory: SelectionMemory): DiscoverySelection {
  const unique = [...new Set(identities)];
  const knownNames = unique.filter((identity) => known.has(identity));
  // A remembered name the registry knows by now was admitted: it leaves the memory.
  const remembered = new Map(memory.waiting.filter((name) => !known.has(name.identity)).map((name) => [name.identity, name]));
  const newNames = seenBeforeFirst(
    unique.filter((identity) => !known.has(identity)),
    (identity) => remembered.get(identity)?.firstSeen,
    memory.random,
  );
  const keptKnown = knownNames.slice(0, limits.cap);
  const newRoom = Math.max(0, Math.min(limits.newBudget, limits.cap - keptKnown.length));
  const keptNew = newNames.slice(0, newRoom);
  return {
    selected: [...keptKnown, ...keptNew],
    droppedOverCap: knownNames.length - keptKnown.length,
    droppedOverBudget: newNames.length - keptNew.length,
    waiting: stillWaiting(newNames, keptNew.length, remembered, memory, waitingBound(limits.newBudget)),
  };
}

/**
 * The memory after this discovery, most deserving first and at most `bound` names: the names left
 * out, in the order they would be chosen next; then the ones chosen now (one whose admission did not
 * happen, near the deadline say, keeps its place; one admitted is known next time and leaves); then
 * remembered names this discovery did not see, oldest first, until the registry forgets them.
 */
function stillWaiting(newNames: readonly string[], chosen: number, remembered: ReadonlyMap<string, WaitingName>, memory: SelectionMemory, bound: number): WaitingName[] {
  const { now, random } = memory;
  const seenNow = (identity: string): WaitingName => ({ identity, firstSeen: remembered.get(identity)?.firstSeen ?? now, lastSeen: now });
  const waiting = [...newNames.slice(chosen, chosen + bound), ...newNames.slice(0, chosen)].slice(0, bound).map(seenNow);
  if (waiting.length >= bound) return waiting;
  const inThisDiscovery = new Set(newNames);
  const unseen = new Map([...remembered].filter(([identity]) => !inThisDiscovery.has(identity)));
  const order = seenBeforeFirst([...unseen.keys()], (identity) => unseen.get(identity)?.firstSeen, random);
  for (const identity of order.slice(0, bound - waiting.length)) {
    const name = unseen.get(identity);
    if (name) waiting.push({ ...name });
  }
  return waiting;
}

/**
 * `names` in a uniformly random order, then those with a first-seen time moved ahead, oldest first.
 * The sort is stable, so names first seen at the same time stay in their random order.
 */
function seenBeforeFirst(names: readonly string[], firstSeen: (identity: string) => number | undefined, random: RandomSource): string[] {
  const order = shuffled(names, random);
  const rank = new Map(order.map((identity) => [identity, firstSeen(identity) ?? Number.POSITIVE_INFINITY]));
  const rankOf = (identity: string) => rank.get(identity) ?? Number.POSITIVE_INFINITY;
  return order.sort((a, b) => {
    const difference = rankOf(a) - rankOf(b);
    // Two names never seen before (infinity minus infinity) are a tie.
    return Number.isNaN(difference) ? 0 : difference;
  });
}

/** Fisher-Yates with `random`, which a test may make predictable. */
function shuffled<T>(items: readonly T[], random: RandomSource): T[] {
  const result = [...items];
  for (let index = result.length - 1; index > 0; index--) {
    // A source returning 1 (Math.random never does) must not index past the end.
    const other = Math.min(index, Math.floor(random() * (index + 1)));
    const swap = result[index] as T;
    result[index] = result[other] as T;
    result[other] = swap;
  }
  return result;
}
