/**
 * Every problem of a configuration in one run, in the project's words. The schema reports all its
 * issues at once; the rules `parseConfig` applies after it stop at the first, so the document is
 * validated again with each offending key set aside (left out, so it takes its default, or, for a
 * required key, given a stand-in) until it passes or nothing more can be set aside. A key already
 * reported is not reported again for what setting it aside caused.
 */
import type { z } from "zod";
import { ConfigError } from "../errors";
import { SETTINGS, type Unit } from "./keys";
import { SECRET_KEYS } from "./secrets";

/**
 * Values that let validation carry on past a required key that is missing or wrong. Never used as
 * configuration: a document that needed one is refused with every problem found.
 */
const STAND_INS: Readonly<Record<string, unknown>> = {
  helper: "/stand-in/helper",
  broker_urls: ["nats://stand-in.invalid:4222"],
  client_jwt: "e30.e30.",
  client_seed: "0".repeat(64),
  upgrades_repository: "https://stand-in.invalid/",
  site: "stand-in",
  deployment_id: "stand-in",
};

/** The longest given value a message repeats, in characters. */
const MAX_SHOWN = 60;

/** The unit of each key that has one, by its dotted name: every message about the key states it. */
const UNITS: ReadonlyMap<string, Unit> = new Map(SETTINGS.flatMap(([name, spec]) => (spec.unit ? [[name, spec.unit] as const] : [])));

/** What a duration key takes, as a message asks for it: a bare number has no unit to read it in. */
const DURATION_WANTED = "a duration: a number with its unit, such as 30s, 5m or 1h30m";

export class ProblemCollector {
  readonly problems: ConfigError[] = [];
  private readonly setAside = new Map<string, "left-out" | "stand-in">();

  constructor(private readonly nested: Readonly<Record<string, readonly string[]>>) {}

  /**
   * Records the problems not already reported (by key, or by a key that contains or is contained by
   * it) and returns the document with their keys set aside, or undefined when one cannot be.
   */
  next(document: Record<string, unknown>, errors: readonly ConfigError[]): Record<string, unknown> | undefined {
    let next: Record<string, unknown> = document;
    // Several issues under one key (two bad list entries) set it aside once.
    const handled = new Set<string>();
    for (const error of errors) {
      if (!this.problems.some((known) => related(known.key, error.key))) this.problems.push(error);
      const setting = this.settingOf(error.key);
      if (setting === undefined) return undefined;
      if (handled.has(setting)) continue;
      handled.add(setting);
      const done = this.setAside.get(setting);
      if (done === "stand-in" || (done === "left-out" && !(setting in STAND_INS))) return undefined;
      next = done === "left-out" ? withSetting(next, setting, STAND_INS[setting]) : withSetting(next, setting, undefined);
      this.setAside.set(setting, done === "left-out" ? "stand-in" : "left-out");
    }
    return next;
  }

  /** The top-level key, or `section.key` of a nested one: what can be left out of the document. */
  private settingOf(key: string): string | undefined {
    if (key === "(root)") return undefined;
    const [top, nested] = key.split(".", 3) as [string, string | undefined];
    return nested !== undefined && this.nested[top]?.includes(nested) ? `${top}.${nested}` : top;
  }
}

function related(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}

function withSetting(document: Record<string, unknown>, setting: string, value: unknown): Record<string, unknown> {
  const [top, nested] = setting.split(".", 2) as [string, string | undefined];
  const copy = { ...document };
  if (nested === undefined) {
    if (value === undefined) delete copy[top];
    else copy[top] = value;
    return copy;
  }
  const section = { ...(copy[top] as Record<string, unknown> | undefined) };
  if (value === undefined) delete section[nested];
  else section[nested] = value;
  copy[top] = section;
  return copy;
}

/** One schema issue as a ConfigError: the key, what was given (unless it is a secret) and what is accepted, with the key's unit. */
export function schemaProblem(issue: z.core.$ZodIssue, document: Record<string, unknown>): ConfigError {
  const key = issue.path.length > 0 ? issue.path.map(String).join(".") : "(root)";
  const unit = UNITS.get(key);
  const given = givenAt(document, issue.path, key, unit);
  return new ConfigError(key, `${accepted(issue, unit)}${given}`);
}

/** `30 seconds`, `1 host`: a number with what it counts. */
function counted(value: number | bigint, unit: Unit | undefined): string {
  if (unit === undefined || unit === "duration") return String(value);
  return `${value} ${Number(value) === 1 ? unit[0] : unit[1]}`;
}

function accepted(issue: z.core.$ZodIssue, unit: Unit | undefined): string {
  switch (issue.code) {
    case "invalid_type":
      if (unit === "duration" && issue.expected === "string") return `must be ${DURATION_WANTED}`;
      return `must be ${kindOf(issue.expected)}${Array.isArray(unit) ? ` of ${unit[1]}` : ""}`;
    case "too_small":
      return issue.origin === "array"
        ? `must have at least ${issue.minimum} entr${issue.minimum === 1 ? "y" : "ies"}`
        : `must be ${issue.inclusive === false ? "more than" : "at least"} ${counted(issue.minimum, unit)}`;
    case "too_big":
      return issue.origin === "array"
        ? `must have at most ${issue.maximum} entries`
        : `must be ${issue.inclusive === false ? "less than" : "at most"} ${counted(issue.maximum, unit)}`;
    case "invalid_value":
      return `must be ${oneOf(issue.values)}`;
    case "invalid_union": {
      const values = issue.errors.flat().flatMap((inner) => (inner.code === "invalid_value" ? inner.values : []));
      return values.length > 0 ? `must be ${oneOf(values)}` : "is not a value this key accepts";
    }
    default:
      return "is not a value this key accepts";
  }
}

function kindOf(expected: string): string {
  switch (expected) {
    case "int":
      return "a whole number";
    case "number":
      return "a number";
    case "string":
      return "text (a YAML string)";
    case "boolean":
      return "true or false";
    case "array":
      return "a list";
    case "object":
      return "a mapping of keys";
    default:
      return expected;
  }
}

function oneOf(values: readonly unknown[]): string {
  const shown = values.map((value) => (typeof value === "string" ? value : String(value)));
  if (shown.length === 1) return shown[0] as string;
  return `${shown.slice(0, -1).join(", ")} or ${shown.at(-1)}`;
}

/** "; got ..." for a non-secret value (a number with its unit); secrets are never repeated, whatever their shape. */
function givenAt(document: Record<string, unknown>, path: readonly PropertyKey[], key: string, unit: Unit | undefined): string {
  const [top, nested] = key.split(".", 2);
  const setting = nested !== undefined && SECRET_KEYS.includes(`${top}.${nested}` as never) ? `${top}.${nested}` : top;
  if (SECRET_KEYS.includes(setting as never)) return "";
  let value: unknown = document;
  for (const part of path) {
    if (value === null || typeof value !== "object") return "";
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  if (value === undefined) return "";
  return `; got ${typeof value === "number" ? counted(value, unit) : describeGiven(value)}`;
}

function describeGiven(value: unknown): string {
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (value !== null && typeof value === "object") return "a mapping";
  const text = typeof value === "string" ? JSON.stringify(value) : String(value);
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
