/**
 * What the benchmarks share as commands: a usage mistake is one line naming the command and exit 2,
 * as in every command of the project (test/unit/config/usage-exit-codes.test.ts); any other failure
 * exits 1 with its stack. Reports go to `--report-dir`, resolved from the repository root.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, type ParseArgsConfig } from "node:util";

const REPO_ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

export class UsageError extends Error {}

/** `options` parsed from `args` (default the process's); what parseArgs refuses (an unknown option, a missing value) is a usage mistake of `command`. */
export function parsedOptions<const T extends NonNullable<ParseArgsConfig["options"]>>(command: string, options: T, args?: string[]) {
  try {
    return parseArgs({ options, ...(args ? { args } : {}) }).values;
  } catch (error) {
    throw new UsageError(`${command}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** Where `--report-dir` (default reports/) is, from the repository root whatever the working directory. */
export function reportDirOf(option: string | undefined): string {
  return resolve(REPO_ROOT, option ?? "reports");
}

/** Runs a benchmark's `main` and exits: 0 when it ends, 2 on a usage mistake, 1 on any other failure. */
export function runBenchmark(name: string, main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      if (error instanceof UsageError) {
        process.stderr.write(`${error.message}\n`);
        process.exit(2);
      }
      process.stderr.write(`${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}

/** A setting's value, or what is wrong with it (naming the setting), for a reader that reports every mistake at once. */
export type Reading<T> = { value: T } | { problem: string };

/** `text` as a whole number of at least `least` (`name` as the operator wrote it: `--runs`, or an environment variable), `fallback` when absent. */
export function readWholeNumber(name: string, text: string | undefined, fallback: number, least = 1): Reading<number> {
  const value = text === undefined ? fallback : Number(text);
  return Number.isInteger(value) && value >= least ? { value } : { problem: `${name} must be a whole number of at least ${least}, not ${text}` };
}

/** `text` as whole numbers of at least 1 separated by commas, `fallback` when absent. */
export function readWholeNumbers(name: string, text: string | undefined, fallback: number[]): Reading<number[]> {
  if (text === undefined) return { value: fallback };
  const values = text.split(",").map((part) => Number(part.trim()));
  return values.every((value) => Number.isInteger(value) && value >= 1) ? { value: values } : { problem: `${name} must be whole numbers of at least 1 separated by commas, not ${text}` };
}

/** The value read, or the usage mistake of `command` that names what was wrong. */
export function valueOf<T>(command: string, reading: Reading<T>): T {
  if ("problem" in reading) throw new UsageError(`${command}: ${reading.problem}`);
  return reading.value;
}

/** A whole-number option, `fallback` when absent; anything else is a usage mistake of `command`. */
export function wholeNumber(command: string, name: string, text: string | undefined, fallback: number, least = 1): number {
  return valueOf(command, readWholeNumber(name, text, fallback, least));
}

/**
 * The JSON report at `path` a benchmark works on, read before anything runs. Missing or not JSON
 * is a usage mistake, worded by `mistake`, not a failed run: nothing ran, and the fix is the
 * operator's (record a report first, or point --report-dir at one). Any other read error fails.
 */
export function recordedJson(path: string, mistake: (what: "missing" | "not JSON", detail: string, cause: unknown) => UsageError): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") throw mistake("missing", "does not exist", error);
    throw error;
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw mistake("not JSON", `is not JSON (${error instanceof Error ? error.message : String(error)})`, error);
  }
}

/**
 * A number option that may have a fraction (`--max-start-load 1.5`, `--idle-minutes 0.5`), `fallback`
 * when absent: at least `bound.least`, or more than `bound.above` where the bound itself means nothing.
 */
export function decimalNumber(command: string, name: string, text: string | undefined, fallback: number, bound: { least: number } | { above: number } = { least: 0 }): number {
  // Number("") is 0: an empty value is a mistake, not zero.
  const value = text === undefined ? fallback : text.trim() === "" ? Number.NaN : Number(text);
  const within = "least" in bound ? value >= bound.least : value > bound.above;
  if (!Number.isFinite(value) || !within) {
    throw new UsageError(`${command}: ${name} must be a number ${"least" in bound ? `of at least ${bound.least}` : `above ${bound.above}`}, not ${text}`);
  }
  return value;
}
