/**
 * Choria request filters (docs/protocol.md §4.3): what the provisioner sends (a server reading
 * them and matching a node is the simulated node's: test/support/choria-node/filter.ts).
 */
interface FactFilter {
  fact: string;
  operator: string;
  value: string;
}

export interface Filter {
  fact: FactFilter[];
  cf_class: string[];
  agent: string[];
  identity: string[];
  compound: unknown[][];
}

export function agentFilter(agent: string): Filter {
  return { fact: [], cf_class: [], agent: [agent], identity: [], compound: [] };
}
