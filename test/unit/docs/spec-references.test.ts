/**
 * Section references in code, tests, tooling and docs point into docs/protocol.md or
 * docs/behaviour.md, at sections those documents have. The sign is written as an escape here so
 * this file's planted bad references are not themselves found by the repository check.
 */
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkRepository, findReferenceProblems, sectionsOf } from "../../../scripts/spec-references";

const S = "\u00a7";
const ROOT = resolve(__dirname, "..", "..", "..");

const NO_STEPS = new Set<string>();
const SECTIONS = new Map([
  [
    "docs/protocol.md",
    new Map([
      ["1", NO_STEPS],
      ["2", NO_STEPS],
      ["2.3", NO_STEPS],
      ["4", NO_STEPS],
      ["4.4", new Set(["1", "2", "3", "4", "5", "6", "7", "8"])],
      ["5", NO_STEPS],
      ["12.4", NO_STEPS],
    ]),
  ],
  [
    "docs/behaviour.md",
    new Map([
      ["2", NO_STEPS],
      ["3", new Set(["1", "2", "7"])],
      ["4", NO_STEPS],
      ["5", NO_STEPS],
      ["8", NO_STEPS],
    ]),
  ],
]);

function problemsIn(file: string, text: string) {
  return findReferenceProblems(file, text, SECTIONS).map(({ line, problem }) => ({ line, problem }));
}

describe("section references", () => {
  it("in this repository all point at existing sections of docs/protocol.md and docs/behaviour.md", () => {
    const problems = checkRepository(ROOT).map(({ file, line, reference, problem }) => `${file}:${line}: ${problem} (${reference})`);

    expect(problems).toEqual([]);
  });

  it("reads section numbers from the documents' headings, and each section's numbered steps", () => {
    const markdown = [
      "# Title",
      "## 1. Subjects",
      "### 2.3 Request",
      `## ${S}7 Steps`,
      "0. Skip",
      "1. First, which continues",
      "    2. a nested list's item, not a step of 7",
      "12. Last",
      "Text 5. not a heading",
      "## Unnumbered heading",
      "3. belongs to no section",
      "#### 9.9",
    ].join("\n");

    expect([...sectionsOf(markdown)].map(([section, steps]) => [section, [...steps]])).toEqual([
      ["1", []],
      ["2.3", []],
      ["7", ["0", "1", "12"]],
      ["9.9", []],
    ]);
  });

  it("accepts named, listed, ranged, relative and bare references", () => {
    const code = [
      `/** Direct RPC (docs/protocol.md ${S}1, ${S}4, ${S}12.4) and the gate (docs/behaviour.md ${S}4). */`,
      `// envelopes (docs/protocol.md ${S}2-${S}4), wrapped list: docs/behaviour.md ${S}2,`,
      ` * ${S}5 and ${S}8`,
      `// the quirk (${S}2.3), see ${S}5`,
    ].join("\n");

    expect(problemsIn("lib/choria/example.ts", code)).toEqual([]);
    expect(problemsIn("docs/lease.md", `The gate (behaviour.md ${S}4), the wire ([protocol](protocol.md) ${S}4.4).`)).toEqual([]);
    expect(problemsIn("docs/protocol.md", `As in ${S}5 and behaviour.md ${S}2; the ping (${S}4.4).`)).toEqual([]);
  });

  it("fails a reference to a document outside the repository or under an old name", () => {
    const code = [
      `// envelopes (choria-wire.md ${S}2)`,
      `// the plan (choria-wire ${S}5, ${S}12.4)`,
      `// the gate (behaviour ${S}4)`,
      `// the spec (../shared/spec/behaviour.md ${S}4)`,
    ].join("\n");

    expect(problemsIn("lib/engine/example.ts", code)).toEqual([
      { line: 1, problem: 'names "choria-wire.md"; references must name docs/protocol.md or docs/behaviour.md' },
      { line: 2, problem: 'names "choria-wire"; references must name docs/protocol.md or docs/behaviour.md' },
      { line: 3, problem: 'names "behaviour"; references must name docs/protocol.md or docs/behaviour.md' },
      { line: 4, problem: 'names "../shared/spec/behaviour.md"; references must name docs/protocol.md or docs/behaviour.md' },
    ]);
  });

  it("fails a relative name that does not resolve to a specification document from the citing file", () => {
    expect(problemsIn("lib/lease/gate.ts", `// the gate (behaviour.md ${S}4)`)).toEqual([
      { line: 1, problem: 'names "behaviour.md"; references must name docs/protocol.md or docs/behaviour.md' },
    ]);
  });

  it("fails a section the document does not have, and a bare reference with no document named before it", () => {
    const code = [`// the filter (${S}4.3)`, `// later (docs/protocol.md ${S}4.3), and the lock (docs/behaviour.md ${S}9)`, `// bare ${S}`].join("\n");

    expect(problemsIn("lib/choria/example.ts", code)).toEqual([
      { line: 1, problem: `names no document, and none is named before it in this file; write docs/protocol.md ${S}4.3` },
      { line: 2, problem: "docs/protocol.md has no section 4.3" },
      { line: 2, problem: "docs/behaviour.md has no section 9" },
      { line: 3, problem: `${S} without a section number` },
    ]);
  });

  it("checks the steps a reference cites", () => {
    const code = [
      `// the server JWT (docs/behaviour.md ${S}3 step 7), the pipeline (docs/protocol.md ${S}4.4 steps 5-8)`,
      `// the nonce (docs/behaviour.md ${S}3 step 9), the pipeline (docs/protocol.md ${S}4.4 steps 1, 2 and 9)`,
    ].join("\n");

    expect(problemsIn("lib/engine/example.ts", code)).toEqual([
      { line: 2, problem: `docs/behaviour.md ${S}3 has no step 9` },
      { line: 2, problem: `docs/protocol.md ${S}4.4 has no step 9` },
    ]);
  });

  it("gives a bare reference after the first named one the file's first document", () => {
    const code = [`/** Discovery (docs/protocol.md ${S}5). */`, `// the gate (docs/behaviour.md ${S}4)`, `// the ping payload (${S}12.4)`].join("\n");

    expect(problemsIn("lib/choria/example.ts", code)).toEqual([]);
    expect(problemsIn("lib/choria/example.ts", code.replace(`${S}12.4`, `${S}8`))).toEqual([{ line: 3, problem: "docs/protocol.md has no section 8" }]);
  });
});
