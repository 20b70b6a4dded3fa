/**
 * Property fuzzing of the host-work message parser: anything can land on an SQS queue (a replayed
 * message, a hand-sent one, a corrupted one), and a message it accepts becomes a NATS subject.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import { identityProblem } from "../../../lib/choria/identity";
import { InvalidInputError } from "../../../lib/errors";
import { recordScenario } from "../../support/chaos/scenario";
import { FUZZ_RUNS, FUZZ_SEED, expectOnly, mutatedText } from "./support";

const hostileName = fc.oneof(
  fc.constantFrom("node1.example.net", "*", ">", "a.*", "a.>", "..", ".a", "a.", "a b", "a\r\nPUB x 1", "", "x".repeat(300)),
  fc.string({ maxLength: 30 }),
);
const fieldArb = (expected: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: expected }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });

const messageArb = fc.record(
  {
    v: fieldArb(fc.constantFrom(1, 2, 0)),
    identity: fieldArb(hostileName),
    term: fieldArb(fc.oneof(fc.nat(), fc.integer({ min: -3, max: -1 }), fc.double())),
    admittedAt: fieldArb(fc.oneof(fc.integer({ min: 1, max: 2_000_000_000_000 }), fc.constant(0), fc.double())),
    source: fieldArb(fc.constantFrom("discovery", "event", "operator", "other")),
    extra: fc.jsonValue({ maxDepth: 1 }),
  },
  { requiredKeys: [] },
);

describe("fuzz: host-work queue messages", () => {
  it("decodeHostWork throws only InvalidInputError and never yields an unsafe identity", ({ task }) => {
    // Arrange
    const valid = encodeHostWork({ identity: "node1.example.net", term: 3, admittedAt: 1_700_000_000_000, source: "discovery" });
    const inputs = fc.oneof(fc.string({ maxLength: 200 }), fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)), messageArb.map((value) => JSON.stringify(value)), mutatedText(valid));
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (body) => {
        tried += 1;
        const work = expectOnly(() => decodeHostWork(body), [InvalidInputError]);
        if (work === undefined) return;
        expect(identityProblem(work.identity)).toBeUndefined();
        expect(Number.isSafeInteger(work.term) && work.term >= 0).toBe(true);
        expect(["discovery", "event", "operator"]).toContain(work.source);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("names the identity field when a queued identity would widen a subject", () => {
    // Arrange
    const bodies = ["*", ">", "a.>", "a..b"].map((identity) => JSON.stringify({ v: 1, identity, term: 1, admittedAt: 1, source: "event" }));

    // Act
    const messages = bodies.map((body) => {
      try {
        decodeHostWork(body);
        return "accepted";
      } catch (error) {
        return (error as Error).message;
      }
    });

    // Assert
    for (const message of messages) expect(message).toMatch(/^invalid host-work message: "identity" identity /);
  });
});
