/**
 * `npm run sim` as docs/testing.md tells someone to run it: a search prints its coverage per fault
 * class and fails when a class went unhit; a failure prints the command that replays it, and that
 * command replays it; `--mutants` reports each known-bad variant; a mistyped option is a usage error.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { FAULT_CLASSES } from "../support/sim/faults";
import { KNOWN_BAD } from "../support/sim/search";

const run = promisify(execFile);

async function sim(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run("npm", ["run", "--silent", "sim", "--", ...args], { cwd: process.cwd(), maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("npm run sim", () => {
  it("prints per fault class how many scenarios it struck in, and fails a search that left a class unhit", async () => {
    const result = await sim("--seeds", "1", "--seed", "5");

    for (const kind of FAULT_CLASSES) expect(result.stdout).toMatch(new RegExp(`^  ${kind} +\\d+$`, "m"));
    expect(result.stdout).toContain("no lifecycle event is lost");
    expect(result.stdout).toContain("FAILED: fault classes no scenario hit");
    expect(result.code).toBe(1);
  });

  it("reports every known-bad variant with --mutants, with the seed and path that replay its catch", async () => {
    const result = await sim("--mutants", "--seeds", "3", "--seed", "3");
    const caught = /^ {2}horizon-ignored +caught by scenario \d+ \(--seed (\d+) --path (\S+)\): (.+)$/m.exec(result.stdout);

    const replayed = await sim("--seed", caught?.[1] ?? "", "--path", caught?.[2] ?? "", "--variant", "horizon-ignored");

    for (const name of Object.keys(KNOWN_BAD)) expect(result.stdout).toMatch(new RegExp(`^  ${name} +(caught by scenario \\d+|NOT CAUGHT)`, "m"));
    expect(caught).not.toBeNull();
    expect(replayed.code).toBe(1);
    expect(replayed.stdout).toContain(caught?.[3]);
    expect(replayed.stdout).toMatch(/^replay: npm run sim -- --seed \d+ --path \S+ --variant horizon-ignored$/m);
  });

  it("refuses a mistyped option with a usage error naming it", async () => {
    const result = await sim("--seedz", "3");

    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--seedz");
  });
});
