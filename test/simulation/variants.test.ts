/**
 * The simulation must be able to fail: each known-bad variant of the pipeline (one guarantee
 * removed) is caught within a budget of the same fixed-seed scenarios the pipeline passes.
 */
import { describe, expect, it } from "vitest";
import { KNOWN_BAD, search } from "../support/sim/search";

const SEED = 20_261_203;
/** Scenarios a variant may take to be caught; the search stops at the first that catches it. */
const BUDGET = 150;

describe("the simulation catches known-bad variants", () => {
  it.each(Object.keys(KNOWN_BAD))(`catches %s within ${BUDGET} scenarios`, async (name) => {
    const result = await search({ runs: BUDGET, seed: SEED, variant: KNOWN_BAD[name], stopAtFirstFailure: true });

    expect(result.failure?.violations.length ?? 0).toBeGreaterThan(0);
  });
});
