/**
 * Search over scenarios: fast-check draws them from one seed, runs each through the whole
 * pipeline, and on a violation shrinks the scenario to a small one that still fails. The seed and
 * the counterexample's path replay it exactly (`npm run sim -- --seed S --path P`).
 */
import fc from "fast-check";
import { FAULT_CLASSES, type FaultClass } from "./faults";
import type { Violation } from "./invariants";
import { scenarios } from "./scenario";
import { runScenario, type Scenario, type SiteVariant } from "./world";

export interface SearchOptions {
  /** Scenarios to run (before any shrinking). */
  runs: number;
  seed: number;
  /** Replays the counterexample this path names under `seed`, and only it. */
  path?: string;
  variant?: SiteVariant;
  /** Stop at the first failure instead of shrinking it (the known-bad variants only need to be caught). */
  stopAtFirstFailure?: boolean;
  /**
   * How long shrinking may go on (default SHRINK_FOR_MS): after it, the smallest failing scenario
   * found so far is the one reported. Each candidate is a whole run, and there can be thousands.
   */
  shrinkForMs?: number;
  onRun?: (index: number) => void;
}

export interface SearchFailure {
  seed: number;
  path: string;
  /** 1-based: the scenario of the search that failed first. */
  foundAtRun: number;
  scenario: Scenario;
  violations: Violation[];
  /** Shrinking ran out of time: the scenario fails and replays, but a smaller one may exist. */
  shrinkCutShort: boolean;
}

export const SHRINK_FOR_MS = 10 * 60_000;

export interface SearchResult {
  runs: number;
  /** Per fault class, how many of the searched scenarios it struck in. */
  hits: Record<FaultClass, number>;
  failure?: SearchFailure;
}

export async function search(options: SearchOptions): Promise<SearchResult> {
  const hits = Object.fromEntries(FAULT_CLASSES.map((kind) => [kind, 0])) as Record<FaultClass, number>;
  let runs = 0;
  let foundAtRun = 0;
  let shrinkUntil = Infinity;
  let shrinkCutShort = false;
  const property = fc.asyncProperty(scenarios, async (scenario) => {
    // A candidate not run counts as passing, so fast-check keeps the last one that failed.
    if (performance.now() > shrinkUntil) {
      shrinkCutShort = true;
      return true;
    }
    const report = await runScenario(scenario, options.variant);
    if (foundAtRun === 0) {
      runs++;
      options.onRun?.(runs);
      for (const kind of report.hits.keys()) hits[kind]++;
    }
    if (report.violations.length === 0) return true;
    if (foundAtRun === 0) {
      foundAtRun = runs;
      shrinkUntil = performance.now() + (options.shrinkForMs ?? SHRINK_FOR_MS);
    }
    return false;
  });
  const details = await fc.check(property, {
    seed: options.seed,
    // A replay runs the one scenario its path names (fast-check would otherwise go on past it when it passes).
    numRuns: options.path === undefined ? options.runs : 1,
    ...(options.path ? { path: options.path } : {}),
    // A replayed path names the (already shrunk) scenario: run it, and only it.
    endOnFailure: options.stopAtFirstFailure === true || options.path !== undefined,
  });
  if (!details.failed || !details.counterexample) return { runs, hits };
  const [scenario] = details.counterexample;
  const { violations } = await runScenario(scenario, options.variant);
  return { runs, hits, failure: { seed: details.seed, path: details.counterexamplePath ?? "", foundAtRun, scenario, violations, shrinkCutShort } };
}

/** The known-bad variants a search must catch, by the name `--variant` takes. */
export const KNOWN_BAD: Record<string, SiteVariant> = {
  "gate-not-read": { gateNotRead: true },
  "term-not-compared": { termNotCompared: true },
  "horizon-ignored": { horizonIgnored: true },
  "pause-ignored": { pauseIgnored: true },
  "registry-per-deployment": { registryPerDeployment: true },
  "ledger-skipped": { ledgerSkipped: true },
};
