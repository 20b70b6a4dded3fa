/**
 * What the benchmarks share as commands: a usage mistake is one line naming the command and exit 2,
 * as in every command of the project (test/unit/config/usage-exit-codes.test.ts); any other failure
 * exits 1 with its stack.
 */

export class UsageError extends Error {}

/** What node:util's parseArgs threw (an unknown option, a missing value), as a usage mistake of `command`. */
export function usageErrorOf(command: string, error: unknown): UsageError {
  return new UsageError(`${command}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
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
