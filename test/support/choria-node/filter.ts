/**
 * A request's filter as a Choria server reads it: its schema, and whether a node answers it (the
 * provisioner only writes filters: lib/choria/filter.ts).
 */
import { EnvelopeError } from "../../../lib/choria/errors";
import type { Filter } from "../../../lib/choria/filter";

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
    fact: facts as Filter["fact"],
    cf_class: strings("cf_class"),
    agent: strings("agent"),
    identity: strings("identity"),
    compound: compound as unknown[][],
  };
}

export interface FilterTarget {
  identity: string;
  agents: readonly string[];
  classes?: readonly string[];
  facts?: Record<string, unknown>;
}

/** An invalid pattern from the wire matches nothing instead of throwing inside the filter. */
function compileOrUndefined(source: string): RegExp | undefined {
  try {
    return new RegExp(source);
  } catch {
    return undefined;
  }
}

function asRegex(pattern: string): RegExp | undefined {
  if (pattern.length >= 2 && pattern.startsWith("/") && pattern.endsWith("/")) return compileOrUndefined(pattern.slice(1, -1));
  return undefined;
}

function matchesName(pattern: string, name: string): boolean {
  const regex = asRegex(pattern);
  return regex ? regex.test(name) : pattern === name;
}

function compareFact(actual: unknown, operator: string, expected: string): boolean {
  if (actual === undefined || actual === null) return false;
  const text = typeof actual === "string" ? actual : JSON.stringify(actual);
  const numeric = Number(text);
  const expectedNumber = Number(expected);
  const bothNumeric = text !== "" && expected !== "" && !Number.isNaN(numeric) && !Number.isNaN(expectedNumber);
  switch (operator) {
    case "==":
      return bothNumeric ? numeric === expectedNumber : text === expected;
    case "!=":
      return bothNumeric ? numeric !== expectedNumber : text !== expected;
    case "=~":
      return (asRegex(expected) ?? compileOrUndefined(expected))?.test(text) ?? false;
    case ">=":
      return bothNumeric ? numeric >= expectedNumber : text >= expected;
    case "<=":
      return bothNumeric ? numeric <= expectedNumber : text <= expected;
    case ">":
      return bothNumeric ? numeric > expectedNumber : text > expected;
    case "<":
      return bothNumeric ? numeric < expectedNumber : text < expected;
    default:
      return false;
  }
}

/**
 * A server's MatchServerRequest: every non-empty category must match. Compound expressions are not
 * evaluated by this implementation (the provisioner never sends them), so a compound filter never
 * matches rather than matching wrongly.
 */
export function matchesFilter(filter: Filter, target: FilterTarget): boolean {
  if (filter.compound.length > 0) return false;
  if (filter.identity.length > 0 && !filter.identity.some((pattern) => matchesName(pattern, target.identity))) return false;
  if (!filter.agent.every((pattern) => target.agents.some((agent) => matchesName(pattern, agent)))) return false;
  if (!filter.cf_class.every((pattern) => (target.classes ?? []).some((klass) => matchesName(pattern, klass)))) return false;
  return filter.fact.every((fact) => compareFact(target.facts?.[fact.fact], fact.operator, fact.value));
}
