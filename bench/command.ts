/**
 * What the benchmarks share as commands: a usage mistake is one line naming the command and exit 2,
 * as in every command of the project (test/unit/config/usage-exit-codes.test.ts); any other failure
 * exits 1 with its stack. Reports go to `--report-dir`, resolved from the repository root.
 */
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

/** A whole-number option (`name` as the operator wrote it: `--runs`, or an environment variable), `fallback` when absent. */
export function wholeNumber(command: string, name: string, text: string | undefined, fallback: number, least = 1): number {
  const value = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(value) || value < least) throw new UsageError(`${command}: ${name} must be a whole number of at least ${least}, not ${text}`);
  return value;
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
