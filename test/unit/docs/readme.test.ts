/**
 * The README stays a page: at most 12 KB, its sections in the order a newcomer needs them (the two
 * commands, how it works, operating, configuring, then pointers and figures), each measured figure
 * one short row naming the report that holds its detail. Content that leaves the README goes to a
 * doc, so every relative link in the README, docs/ and reports/ must still reach a file and a
 * heading of it.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..", "..");
const README = readFileSync(resolve(ROOT, "README.md"), "utf8");

// "At most 12 KB" holds whether a KB is read as 1,000 or 1,024 bytes.
const README_MAX_BYTES = 12_000;
const MEASURED_CELL_MAX_CHARS = 300;

/** The text outside fenced code blocks, line by line (a `#` in a shell block is no heading). */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split("\n").filter((line) => {
    if (line.startsWith("```")) fenced = !fenced;
    return !fenced && !line.startsWith("```");
  });
}

/** The anchors GitHub gives a document's headings (a repeated heading gets -1, -2, ...). */
function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Each relative link of a Markdown file that names no file, or a heading its target lacks. */
function brokenLinks(file: string): string[] {
  const text = readFileSync(resolve(ROOT, file), "utf8");
  const problems: string[] = [];
  for (const [, target] of proseLines(text).join("\n").matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(target!)) continue;
    const [path, anchor] = target!.split("#") as [string, string | undefined];
    const resolved = path === "" ? resolve(ROOT, file) : resolve(ROOT, dirname(file), path);
    if (!existsSync(resolved)) {
      problems.push(`${file}: ${target} names no file`);
    } else if (anchor !== undefined && resolved.endsWith(".md") && !headingAnchors(readFileSync(resolved, "utf8")).has(anchor)) {
      problems.push(`${file}: ${target}: ${relative(ROOT, resolved)} has no such heading`);
    }
  }
  return problems;
}

/** The rows of the "## Measured" table, as trimmed cells, the header row left out. */
function measuredRows(): string[][] {
  const section = README.slice(README.indexOf("\n## Measured"));
  const start = section.indexOf("\n|");
  const end = section.indexOf("\n\n", start);
  return section
    .slice(start, end === -1 ? undefined : end)
    .split("\n")
    .filter((line) => line.startsWith("|") && !line.startsWith("|---"))
    .slice(1)
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
}

describe("README.md", () => {
  it(`is at most ${README_MAX_BYTES} bytes`, () => {
    expect(Buffer.byteLength(README, "utf8")).toBeLessThanOrEqual(README_MAX_BYTES);
  });

  it("has its sections in order: the two commands, how it works, operate, configure, then pointers and figures", () => {
    const sections = proseLines(README)
      .filter((line) => line.startsWith("## "))
      .map((line) => line.slice(3));

    expect(sections).toEqual(["Quick start", "How it works", "Deploy and operate", "Configuration", "More", "Measured"]);
  });

  it("starts with the two commands: the whole pipeline locally, then the tests", () => {
    const firstBlock = README.slice(README.indexOf("```sh\n") + 6, README.indexOf("\n```", README.indexOf("```sh\n")));
    const commands = firstBlock.split("\n").map((line) => line.replace(/\s+#.*$/, "").trim());

    expect(commands).toEqual(["npm ci && npm run local", "npm test"]);
  });

  it(`gives each measured figure in cells of at most ${MEASURED_CELL_MAX_CHARS} characters, with the report that holds the detail`, () => {
    const rows = measuredRows();

    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row, row.join(" | ")).toHaveLength(3);
      for (const cell of row) expect(cell.length, cell).toBeLessThanOrEqual(MEASURED_CELL_MAX_CHARS);
      const report = /^\[[^\]]+\]\((reports\/[^)#]+\.md)\)$/.exec(row[2]!)?.[1];
      expect(report !== undefined && existsSync(resolve(ROOT, report)), `${row[0]}: "${row[2]}" links no report in reports/`).toBe(true);
    }
  });
});

describe("relative links in README.md, docs/ and reports/", () => {
  it("each names a file that exists, and a heading that file has", () => {
    const files = ["README.md", ...["docs", "reports"].flatMap((folder) => readdirSync(resolve(ROOT, folder)).filter((name) => name.endsWith(".md")).map((name) => join(folder, name)))];

    expect(files.flatMap(brokenLinks)).toEqual([]);
  });
});
