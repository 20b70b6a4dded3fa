/**
 * The search's shrinking is bounded in time: once the bound has passed, the smallest failing
 * scenario found so far is reported, and its seed and path still replay it exactly.
 */
import { describe, expect, it } from "vitest";
import { KNOWN_BAD, search } from "../support/sim/search";

const SEED = 20_261_203;
const variant = KNOWN_BAD["horizon-ignored"];

describe("search", () => {
  it("reports the failing scenario as found when shrinking has no time left, and the report replays", async () => {
    const cut = await search({ runs: 20, seed: SEED, variant, shrinkForMs: 0 });
    const replayed = await search({ runs: 1, seed: cut.failure!.seed, path: cut.failure!.path, variant });

    expect(cut.failure?.shrinkCutShort).toBe(true);
    expect(replayed.failure?.scenario).toEqual(cut.failure?.scenario);
    expect(replayed.failure?.violations.map((violation) => violation.invariant)).toEqual(cut.failure?.violations.map((violation) => violation.invariant));
  });

  it("shrinks to a scenario no larger than the one first found when it has time", async () => {
    const first = await search({ runs: 20, seed: SEED, variant, shrinkForMs: 0 });
    const shrunk = await search({ runs: 20, seed: SEED, variant });

    expect(shrunk.failure?.shrinkCutShort).toBe(false);
    expect(shrunk.failure?.foundAtRun).toBe(first.failure?.foundAtRun);
    expect(shrunk.failure!.scenario.events.length).toBeLessThanOrEqual(first.failure!.scenario.events.length);
    expect(shrunk.failure!.scenario.nodes).toBeLessThanOrEqual(first.failure!.scenario.nodes);
  });
});
