/**
 * The seeded simulation of the whole pipeline (test/support/sim): a budget of scenarios that must
 * keep every guarantee and strike every fault class, and exact replay. `npm run sim` runs any
 * number of seeds; this is the budget every `npm test` runs (the known-bad variants it must catch:
 * variants.test.ts, a file of its own so the two run side by side).
 */
import { describe, expect, it } from "vitest";
import { FAULT_CLASSES } from "../support/sim/faults";
import { search, type SearchFailure } from "../support/sim/search";
import { scenarios } from "../support/sim/scenario";
import { runScenario } from "../support/sim/world";
import fc from "fast-check";

/** Fixed, so every run of the suite searches the same scenarios; `npm run sim` draws new ones. */
const SEED = 20_261_203;
const RUNS = 80;

function told(failure: SearchFailure | undefined): string | undefined {
  if (!failure) return undefined;
  const broken = failure.violations.map((violation) => `${violation.invariant}: ${violation.detail}`).join("\n");
  return `${broken}\nreplay: npm run sim -- --seed ${failure.seed} --path ${failure.path}`;
}

describe("the whole pipeline, simulated", () => {
  it(`keeps every guarantee over ${RUNS} seeded scenarios, and every fault class strikes`, async () => {
    const result = await search({ runs: RUNS, seed: SEED });

    expect(told(result.failure)).toBeUndefined();
    expect(FAULT_CLASSES.filter((kind) => result.hits[kind] === 0)).toEqual([]);
  });

  it("replays a scenario exactly: the same seed gives the same requests at the same nodes", async () => {
    const [scenario] = fc.sample(scenarios, { seed: SEED, numRuns: 1 });

    const first = await runScenario(scenario!);
    const second = await runScenario(scenario!);

    expect(first.records.length).toBeGreaterThan(0);
    expect(second.records).toEqual(first.records);
    expect([...second.hits]).toEqual([...first.hits]);
  });
});
