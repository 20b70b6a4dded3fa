/**
 * `npm run bench:wire` (docs/testing.md, "Benchmarks") runs as documented: a nats-server and a
 * simulated fleet, broadcast discovery timed, then rpcutil#inventory round trips one after another
 * and at each concurrency level; it prints a figure for each and writes its report where told.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmScript, temporaryDirs } from "../../support/npm-script";

const NODES = 50;
const CALLS = 80;

interface WireReport {
  nodes: number;
  loadAverage1m: { start: number; end: number };
  fleetStartMs: number;
  discovery: { runs: Array<{ ms: number; found: number }>; medianMs: number };
  inventory: {
    sequential: { calls: number; seconds: number; perSecond: number; failures: number };
    concurrent: Array<{ inFlight: number; calls: number; seconds: number; perSecond: number; failures: number }>;
  };
}

describe("bench:wire", () => {
  const temporaryDir = temporaryDirs("wire-");

  it("times discovery and inventory round trips over the fleet it is given, and writes its report where told", async () => {
    // Arrange
    const reportDir = await temporaryDir();

    // Act
    const { stdout } = await npmScript("bench:wire", ["--nodes", String(NODES), "--calls", String(CALLS), "--report-dir", reportDir], { timeoutMs: 120_000 });

    // Assert: what it prints, each section with figures.
    expect(stdout).toMatch(new RegExp(`^One nats-server and ${NODES} simulated provisioning-mode nodes .*; fleet start \\d+ ms\\.$`, "m"));
    expect(stdout).toMatch(/^Median \d+ ms over 5 runs /m);
    expect(stdout.match(new RegExp(`^\\| [1-5] \\| \\d+ \\| ${NODES} \\|$`, "gm"))).toHaveLength(5);
    expect(stdout).toMatch(new RegExp(`^\\| sequential \\| ${CALLS / 8} \\| \\d+ \\| 0 \\|$`, "m"));
    for (const inFlight of [1, 16, 64, 256]) expect(stdout).toMatch(new RegExp(`^\\| ${inFlight} in flight \\| ${CALLS} \\| \\d+ \\| 0 \\|$`, "m"));

    // Assert: what it writes, every figure a number.
    const report = JSON.parse(await readFile(join(reportDir, "wire.json"), "utf8")) as WireReport;
    expect(report.nodes).toBe(NODES);
    expect(report.discovery.runs.map((run) => run.found)).toEqual([NODES, NODES, NODES, NODES, NODES]);
    // Discovery waits out a 300 ms quiet window after the last reply.
    expect(report.discovery.medianMs).toBeGreaterThanOrEqual(300);
    // The sequential row counts its failures as the concurrent ones do (test/unit/bench/round-trips.test.ts).
    expect(report.inventory.sequential).toMatchObject({ calls: CALLS / 8, failures: 0 });
    expect(report.inventory.sequential.perSecond).toBeGreaterThan(0);
    expect(report.inventory.concurrent.map((level) => [level.inFlight, level.calls, level.failures])).toEqual([1, 16, 64, 256].map((inFlight) => [inFlight, CALLS, 0]));
    for (const level of report.inventory.concurrent) expect(level.perSecond).toBeGreaterThan(0);
    for (const figure of [report.fleetStartMs, report.loadAverage1m.start, report.loadAverage1m.end]) expect(Number.isFinite(figure)).toBe(true);
    expect(await readFile(join(reportDir, "wire.md"), "utf8")).toBe(stdout.slice(0, stdout.indexOf("\nwrote ")));
  }, 150_000);
});
