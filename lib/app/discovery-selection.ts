/**
 * Which discovered names a discovery admits (docs/behaviour.md §5). Any client on the provisioning
 * broker can answer a discovery with made-up names, faster than real nodes answer, so the order
 * replies arrived in must not decide: names the registry already knows (admitted before, failed,
 * provisioned) go first, then at most `newBudget` names never seen before, and `cap`
 * (`discovery_max_nodes`) bounds the total. The rest are dropped and counted; the next discovery
 * sees them again.
 */
export interface DiscoverySelection {
  selected: string[];
  /** Known names left out because the cap was reached. */
  droppedOverCap: number;
  /** New names left out because the budget of new names or the cap was reached. */
  droppedOverBudget: number;
}

export function selectDiscovered(identities: readonly string[], known: ReadonlySet<string>, cap: number, newBudget: number): DiscoverySelection {
  const unique = [...new Set(identities)];
  const knownNames = unique.filter((identity) => known.has(identity));
  const newNames = unique.filter((identity) => !known.has(identity));
  const keptKnown = knownNames.slice(0, cap);
  const keptNew = newNames.slice(0, Math.max(0, Math.min(newBudget, cap - keptKnown.length)));
  return {
    selected: [...keptKnown, ...keptNew],
    droppedOverCap: knownNames.length - keptKnown.length,
    droppedOverBudget: newNames.length - keptNew.length,
  };
}
