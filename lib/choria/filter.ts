/**
 * Choria request filters (docs/protocol.md §4.3): what the provisioner sends, and their schema as
 * a server reads it (whether a node matches is the simulated node's: test/support/choria-node/filter.ts).
 */
import { EnvelopeError } from "./errors";

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

const REQUIRED_KEYS = ["fact", "cf_class", "identity", "compound"] as const;

/** Servers reject a filter lacking any of fact/cf_class/identity/compound (`null` is not `[]`). */
export function parseFilter(value: unknown, required: boolean): Filter {
  if (value === undefined && !required) return { fact: [], cf_class: [], agent: [], identity: [], compound: [] };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new EnvelopeError("request filter", "must be an object");
  }
  const object = value as Record<string, unknown>;
  for (const key of REQUIRED_KEYS) {
    if (!Array.isArray(object[key])) throw new EnvelopeError("request filter", `"${key}" must be an array`);
  }
  if (object.agent !== undefined && object.agent !== null && !Array.isArray(object.agent)) {
    throw new EnvelopeError("request filter", `"agent" must be an array`);
  }
  const strings = (key: string) => {
    const list = (object[key] ?? []) as unknown[];
    if (!list.every((entry) => typeof entry === "string")) throw new EnvelopeError("request filter", `"${key}" must hold strings`);
    return list as string[];
  };
  const facts = object.fact as unknown[];
  for (const fact of facts) {
    const entry = fact as Record<string, unknown> | null;
    if (typeof entry?.fact !== "string" || typeof entry.operator !== "string" || typeof entry.value !== "string") {
      throw new EnvelopeError("request filter", `"fact" entries need string fact, operator and value`);
    }
  }
  const compound = object.compound as unknown[];
  if (!compound.every((entry) => Array.isArray(entry) && entry.every((item) => typeof item === "object" && item !== null && !Array.isArray(item)))) {
    throw new EnvelopeError("request filter", `"compound" must hold arrays of objects`);
  }
  return {
    fact: facts as FactFilter[],
    cf_class: strings("cf_class"),
    agent: strings("agent"),
    identity: strings("identity"),
    compound: compound as unknown[][],
  };
}
