/**
 * `npm run bench` (docs/testing.md's benchmark table) runs as documented, at its smallest: one run
 * of the matrix on the real local stack (nats-server, DynamoDB Local, fauxqs), its figures printed
 * and written where told; and `--markdown-only` rewrites the report from the JSON found there.
 * The failover run is left out: its length is the lease's (about a minute from the crash to the
 * standby's claim), not the fleet's.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmScript, REPO_ROOT, temporaryDirs } from "../../support/npm-script";

const NUMBER = String.raw`\d+(\.\d+)?`;

interface RecordedRun {
  label: string;
  nodes: number;
  provisioned: number;
  complete: boolean;
  hosts_per_minute: number;
  cpu_seconds: { total: number };
  dynamodb: { writes_per_host: number };
}

const bench = (...args: string[]) => npmScript("bench", args, { timeoutMs: 100_000 });

describe("npm run bench", () => {
  const reportDir = temporaryDirs("bench-pipeline-");

  it("runs only the run named, at the size given, and writes its figures and findings where told", async () => {
    // Arrange
    const dir = await reportDir();

    // Act
    const { stdout } = await bench("--sizes", "100", "--only", "bash-100", "--report-dir", dir);

    // Assert: printed as it ran, and nothing else of the matrix ran.
    expect(stdout).toMatch(/^== bash-100: 100 nodes, helper bash, concurrency 10 x workers 10$/m);
    expect(stdout).toMatch(new RegExp(String.raw`^  -> 100/100 provisioned, \d+ hosts/min, .* ${NUMBER} DynamoDB writes/host`, "m"));
    expect(stdout.match(/^== /gm)).toHaveLength(1);
    expect(stdout).toContain(`wrote ${join(dir, "bench.json")} and ${join(dir, "bench.md")}`);
    const recorded = JSON.parse(await readFile(join(dir, "bench.json"), "utf8")) as { runs: RecordedRun[] };
    expect(recorded.runs.map((run) => run.label)).toEqual(["bash-100"]);
    const [run] = recorded.runs;
    expect(run).toMatchObject({ nodes: 100, provisioned: 100, complete: true });
    expect(run?.hosts_per_minute).toBeGreaterThan(0);
    expect(run?.cpu_seconds.total).toBeGreaterThan(0);
    // The findings name five writes of every provisioned host (docs/behaviour.md §2); the lease's add to them.
    expect(run?.dynamodb.writes_per_host).toBeGreaterThanOrEqual(5);

    // Assert: the report's rows carry figures, and its findings read the run.
    const report = await readFile(join(dir, "bench.md"), "utf8");
    const cells = (count: number) => Array.from({ length: count }, () => NUMBER).join(" \\| ");
    expect(report).toMatch(new RegExp(String.raw`^\| bash-100 \| 100 \| bash \| 10 × 10 \| 100 \| yes \| ${cells(6)} \| ${NUMBER} / ${NUMBER} \|$`, "m"));
    expect(report).toMatch(new RegExp(String.raw`^\| bash-100 \| ${cells(6)} \| ${NUMBER} / ${NUMBER} / ${NUMBER} / ${NUMBER} \|$`, "m"));
    expect(report).toMatch(new RegExp(String.raw`^\| bash-100 \| ${run?.dynamodb.writes_per_host} \| ${cells(4)} \| ${NUMBER} \|$`, "m"));
    expect(report).toMatch(/^## Findings$/m);
    expect(report).toContain(`**Writes per host.** ${run?.dynamodb.writes_per_host} DynamoDB writes a host in bash-100:`);
  }, 110_000);

  it("--markdown-only rewrites bench.md from the bench.json in the report directory, running nothing", async () => {
    // Arrange: the committed runs under a date of our own, so the report can only have come from this copy.
    const dir = await reportDir();
    const committed = JSON.parse(await readFile(join(REPO_ROOT, "reports/bench.json"), "utf8")) as { generated: string; runs: RecordedRun[] };
    await writeFile(join(dir, "bench.json"), JSON.stringify({ ...committed, generated: "2000-01-02T03:04:05.000Z" }));

    // Act
    const { stdout } = await bench("--markdown-only", "--report-dir", dir);

    // Assert
    expect(stdout).toBe(`rewrote ${join(dir, "bench.md")} from ${join(dir, "bench.json")}\n`);
    const report = await readFile(join(dir, "bench.md"), "utf8");
    expect(report).toMatch(/^Generated 2000-01-02T03:04:05\.000Z by /m);
    for (const run of committed.runs) expect(report).toMatch(new RegExp(String.raw`^\| ${run.label} \| ${run.nodes} \| `, "m"));
    expect(report).toMatch(/^## Findings$/m);
    expect(await readFile(join(REPO_ROOT, "reports/bench.md"), "utf8")).not.toContain("2000-01-02T03:04:05.000Z");
  }, 60_000);
});
