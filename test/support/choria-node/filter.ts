/** Whether a node answers a request's filter, as a Choria server decides it (the provisioner only writes filters: lib/choria/filter.ts). */
import type { Filter } from "../../../lib/choria/filter";

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
