/**
 * docs/architecture.md's layer table against the lint zones of eslint-rules/layers.js: each zone
 * has its row, naming the same folders and the same forbidden imports, and every folder of lib/
 * is in a zone, so a new folder cannot sit outside the rules unnoticed.
 */
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ZONES } from "../../../eslint-rules/layers.js";

const ROOT = resolve(__dirname, "..", "..", "..");
const doc = readFileSync(resolve(ROOT, "docs", "architecture.md"), "utf8");

/** The table of the "## Layers" section: each row's cells. */
function layerRows(): string[][] {
  const section = doc.slice(doc.indexOf("## Layers"));
  const table = section.slice(0, section.indexOf("\n\n", section.indexOf("|")));
  return table
    .split("\n")
    .filter((line) => line.startsWith("|") && !line.startsWith("|---"))
    .slice(1)
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
}

/** The backticked paths of a cell, without a trailing slash. */
const paths = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!.replace(/\/$/, ""));

describe("docs/architecture.md's layer table", () => {
  const rows = layerRows();

  it.each(ZONES.map((zone) => [zone.name, zone] as const))("has the %s zone's row: its folders and what they may not import", (_name, zone) => {
    const row = rows.find(([folder]) => paths(folder!).includes(zone.files[0]!));

    expect(row, `no row names ${zone.files[0]}`).toBeDefined();
    expect(paths(row![0]!).sort()).toEqual([...zone.files].sort());
    expect(paths(row![2]!).sort()).toEqual([...zone.forbidden].sort());
  });

  it("puts every folder and file of lib/ in a zone", () => {
    const entries = readdirSync(resolve(ROOT, "lib"), { withFileTypes: true }).map((entry) => `lib/${entry.name}`);
    const zoned = new Set(ZONES.flatMap((zone) => zone.files));

    expect(entries.filter((entry) => !zoned.has(entry))).toEqual([]);
  });
});
