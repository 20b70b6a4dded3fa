import { ProvisionerError } from "../errors";

/** A duration string could not be parsed. The message quotes the text, which is never a secret. */
export class DurationError extends ProvisionerError {}

const NANOS_PER_MS = 1_000_000;
const MS_PER_HOUR = 3_600_000;
/** Go's time.Duration is an int64 of nanoseconds. */
const MAX_DURATION_NS = 2 ** 63 - 1;

const GO_UNIT_NANOS: Record<string, number> = {
  ns: 1,
  us: 1_000,
  "\u00b5s": 1_000,
  "\u03bcs": 1_000,
  ms: 1_000_000,
  s: 1_000_000_000,
  m: 60_000_000_000,
  h: 3_600_000_000_000,
};

/** Hours per unit for the calendar-ish suffixes the Choria parser adds on top of Go's. */
const CALENDAR_UNIT_HOURS: Record<string, number> = {
  w: 7 * 24,
  W: 7 * 24,
  d: 24,
  D: 24,
  M: 30 * 24,
  y: 365 * 24,
  Y: 365 * 24,
};

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const GO_SEGMENT = /^(\d*)(?:\.(\d*))?([^\d.]+)/;

/**
 * Parses a duration the way go-choria's `ParseDuration` does and returns milliseconds.
 *
 * The last character picks the parser: `w/W`, `d/D`, `M` (30 days) and `y/Y` (365 days) take a
 * single decimal number, rounded to float32 and truncated to whole hours as Go does; `s`, `m`, `h`
 * go to Go's `time.ParseDuration` (so `1h30m`, `1.5h`, `250ms`). `S` and `H` reach Go's parser too
 * and are rejected there. An empty string is 0, as in Go.
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (trimmed === "") return 0;

  const unit = trimmed.slice(-1);
  const hoursPerUnit = CALENDAR_UNIT_HOURS[unit];
  if (hoursPerUnit !== undefined) {
    const number = trimmed.slice(0, -1);
    if (!DECIMAL.test(number)) throw new DurationError(`invalid duration "${text}"`);
    const hours = Math.trunc(Math.fround(Number(number)) * hoursPerUnit);
    return checkRange(hours * MS_PER_HOUR, text);
  }
  if (unit === "s" || unit === "S" || unit === "m" || unit === "h" || unit === "H") {
    return parseGoDuration(trimmed, text);
  }
  throw new DurationError(`invalid duration "${text}": unknown unit "${unit}"`);
}

function parseGoDuration(trimmed: string, original: string): number {
  let rest = trimmed;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "") throw new DurationError(`invalid duration "${original}"`);

  let totalNs = 0;
  while (rest !== "") {
    const match = GO_SEGMENT.exec(rest);
    const whole = match?.[1] ?? "";
    const fraction = match?.[2] ?? "";
    const unitText = match?.[3] ?? "";
    const unitNs = GO_UNIT_NANOS[unitText];
    if (!match || (whole === "" && fraction === "")) {
      throw new DurationError(`invalid duration "${original}"`);
    }
    if (unitNs === undefined) {
      throw new DurationError(`invalid duration "${original}": unknown unit "${unitText}"`);
    }
    totalNs += Number(`${whole || "0"}.${fraction || "0"}`) * unitNs;
    rest = rest.slice(match[0].length);
  }
  return checkRange((sign * totalNs) / NANOS_PER_MS, original);
}

function checkRange(ms: number, original: string): number {
  if (!Number.isFinite(ms) || Math.abs(ms * NANOS_PER_MS) > MAX_DURATION_NS) {
    throw new DurationError(`invalid duration "${original}": out of range`);
  }
  return ms;
}

const MS_PER_MINUTE = 60_000;

/**
 * A length of time as a Go duration that `parseDuration` reads back (`7s`, `1m30s`, `1h`, `250ms`):
 * how messages about duration keys state values they computed, in the unit the keys are written in.
 */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  const sign = ms < 0 ? "-" : "";
  const magnitude = Math.abs(ms);
  if (magnitude < 1_000) return `${sign}${magnitude}ms`;
  const hours = Math.floor(magnitude / MS_PER_HOUR);
  const minutes = Math.floor((magnitude % MS_PER_HOUR) / MS_PER_MINUTE);
  // Whole milliseconds: a computed difference must not show float noise (7.000000001s).
  const seconds = Math.round(magnitude % MS_PER_MINUTE) / 1_000;
  const parts = [hours > 0 ? `${hours}h` : "", minutes > 0 ? `${minutes}m` : "", seconds > 0 ? `${seconds}s` : ""];
  return `${sign}${parts.join("")}`;
}
