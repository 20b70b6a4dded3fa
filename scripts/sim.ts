/**
 * The seeded simulation of the whole pipeline (test/support/sim): deployments, stores, queues,
 * helper and fleet on virtual time, with faults and operator actions drawn from the seed.
 *
 *   npm run sim -- --seeds 2000                 search 2,000 scenarios (a random seed unless --seed)
 *   npm run sim -- --seed S --path P            replay one failing scenario exactly
 *   npm run sim -- --seeds 200 --mutants        each known-bad variant must be caught
 *   npm run sim -- --seeds 200 --variant NAME   search one known-bad variant
 *
 * Prints, per fault class, how many scenarios it struck in (a class never hit fails the run), the
 * invariants checked, and for a failure the shrunk scenario, what broke and the command replaying it.
 */
import { parseArgs } from "node:util";
import { FAULT_CLASSES } from "../test/support/sim/faults";
import { INVARIANTS } from "../test/support/sim/invariants";
import { KNOWN_BAD, search, SHRINK_FOR_MS, type SearchResult } from "../test/support/sim/search";

function usageError(message: string): never {
  process.stderr.write(`sim: ${message}\n`);
  process.exit(2);
}

interface Options {
  seeds: number;
  seed: number;
  path?: string;
  mutants: boolean;
  variant?: string;
}

function parseOptions(): Options {
  let values;
  try {
    values = parseArgs({ options: { seeds: { type: "string" }, seed: { type: "string" }, path: { type: "string" }, mutants: { type: "boolean" }, variant: { type: "string" } } }).values;
  } catch (error) {
    usageError(error instanceof Error ? error.message : String(error));
  }
  const whole = (name: string, text: string | undefined, fallback: number) => {
    const value = text === undefined ? fallback : Number(text);
    if (!Number.isSafeInteger(value) || value < 0) usageError(`--${name} must be a whole number, got ${JSON.stringify(text)}`);
    return value;
  };
  if (values.variant !== undefined && !(values.variant in KNOWN_BAD)) usageError(`--variant must be one of ${Object.keys(KNOWN_BAD).join(", ")}`);
  if (values.path !== undefined && values.seed === undefined) usageError("--path replays a counterexample of one --seed: give both");
  return {
    seeds: Math.max(1, whole("seeds", values.seeds, 200)),
    seed: whole("seed", values.seed, Math.floor(Math.random() * 2 ** 31)),
    ...(values.path === undefined ? {} : { path: values.path }),
    mutants: values.mutants === true,
    ...(values.variant === undefined ? {} : { variant: values.variant }),
  };
}

function progress(total: number): (run: number) => void {
  const started = performance.now();
  return (run) => {
    if (run % 50 !== 0 && run !== total) return;
    process.stderr.write(`  ${run}/${total} scenarios, ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
  };
}

/** A normal search: prints the coverage, and the failure with its replay command. Returns whether it passed. */
async function searchOnce(options: Options): Promise<boolean> {
  const variant = options.variant === undefined ? undefined : KNOWN_BAD[options.variant];
  process.stdout.write(`searching ${options.path ? "one replayed scenario" : `${options.seeds} scenarios`} from seed ${options.seed}${options.variant ? ` (variant ${options.variant})` : ""}\n`);
  const result = await search({ runs: options.seeds, seed: options.seed, ...(options.path ? { path: options.path } : {}), ...(variant ? { variant } : {}), onRun: progress(options.seeds) });
  const unhit = printCoverage(result);
  if (result.failure) {
    const { failure } = result;
    const shrunk = failure.shrinkCutShort ? `shrinking stopped after ${SHRINK_FOR_MS / 60_000} minutes at` : "shrunk to";
    process.stdout.write(`\nFAILED at scenario ${failure.foundAtRun}; ${shrunk}:\n${JSON.stringify(failure.scenario)}\n`);
    for (const violation of failure.violations) process.stdout.write(`  ${violation.invariant}: ${violation.detail}\n`);
    const variantFlag = options.variant ? ` --variant ${options.variant}` : "";
    process.stdout.write(`replay: npm run sim -- --seed ${failure.seed} --path ${failure.path}${variantFlag}\n`);
    return false;
  }
  if (unhit.length > 0 && !options.path) {
    process.stdout.write(`\nFAILED: fault classes no scenario hit: ${unhit.join(", ")} (the search tested nothing of them; run more seeds)\n`);
    return false;
  }
  process.stdout.write(`\npassed: ${result.runs} scenarios, no invariant broken\n`);
  return true;
}

function printCoverage(result: SearchResult): string[] {
  process.stdout.write(`\nfault class: scenarios it struck in (of ${result.runs})\n`);
  for (const kind of FAULT_CLASSES) process.stdout.write(`  ${kind.padEnd(24)} ${result.hits[kind]}\n`);
  process.stdout.write(`invariants checked after every scenario:\n${INVARIANTS.map((invariant) => `  - ${invariant}\n`).join("")}`);
  return FAULT_CLASSES.filter((kind) => result.hits[kind] === 0);
}

/** Each known-bad variant, searched until caught within the seed budget. Returns whether all were. */
async function searchMutants(options: Options): Promise<boolean> {
  process.stdout.write(`known-bad variants, each searched from seed ${options.seed} with a budget of ${options.seeds} scenarios:\n`);
  let allCaught = true;
  for (const [name, variant] of Object.entries(KNOWN_BAD)) {
    const result = await search({ runs: options.seeds, seed: options.seed, variant, stopAtFirstFailure: true });
    const failure = result.failure;
    if (!failure) {
      allCaught = false;
      process.stdout.write(`  ${name.padEnd(24)} NOT CAUGHT in ${result.runs} scenarios\n`);
      continue;
    }
    const first = failure.violations[0];
    process.stdout.write(`  ${name.padEnd(24)} caught by scenario ${failure.foundAtRun} (--seed ${failure.seed} --path ${failure.path}): ${first?.invariant}\n`);
  }
  process.stdout.write(allCaught ? "every known-bad variant was caught\n" : "FAILED: a known-bad variant went uncaught\n");
  return allCaught;
}

const options = parseOptions();
const passed = options.mutants ? await searchMutants(options) : await searchOnce(options);
process.exit(passed ? 0 : 1);
