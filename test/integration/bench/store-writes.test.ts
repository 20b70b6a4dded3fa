/**
 * `npm run bench:store-writes` (docs/behaviour.md §2, "Writes per host") runs as documented: it
 * takes hosts through the product's five writes and the two joined alternatives against DynamoDB
 * Local, and reports a CPU figure for each, for DynamoDB Local and for the client.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");

describe("bench:store-writes", () => {
  let reportDir: string | undefined;
  afterAll(async () => {
    if (reportDir) await rm(reportDir, { recursive: true, force: true });
  });

  it("reports the CPU of each of a host's writes and of each joined alternative, and writes its report where told", async () => {
    // Arrange
    reportDir = await mkdtemp(join(tmpdir(), "store-writes-"));

    // Act
    const { stdout } = await promisify(execFile)("npm", ["run", "--silent", "bench:store-writes", "--", "--hosts", "30", "--rounds", "1", "--report-dir", reportDir], { cwd: ROOT, timeout: 180_000 });

    // Assert: every row has figures, and the JSON holds each one as a number.
    const figures = String.raw`\| \d+(\.\d+)? \| \d+(\.\d+)? \| \d+(\.\d+)? \|`;
    for (const write of ["admit (UpdateItem)", "claim (UpdateItem, ALL_NEW)", "ledger record (PutItem, indexed)", "credentials on the claim (UpdateItem)", "end of the claim (UpdateItem)", "all five, per host"]) {
      expect(stdout).toMatch(new RegExp(String.raw`^\| ${write.replace(/[()]/g, "\\$&")} ${figures}$`, "m"));
    }
    expect(stdout).toMatch(new RegExp(String.raw`^\| a discovery chunk's 10 admissions as one TransactWriteItems ${figures} \d+(\.\d+)? \(admit\) \|$`, "m"));
    expect(stdout).toMatch(new RegExp(String.raw`^\| a host's ledger record and credentials as one TransactWriteItems ${figures} \d+(\.\d+)? \(ledger \+ credentials\) \|$`, "m"));
    const report = JSON.parse(await readFile(join(reportDir, "store-writes.json"), "utf8")) as {
      hosts_per_round: number;
      rounds: unknown[];
      steps: Record<string, { dynamoDbLocal: number; client: number }>;
      alternatives: Record<string, { dynamoDbLocal: number; client: number; replaces: { dynamoDbLocal: number; client: number } }>;
    };
    expect(report.hosts_per_round).toBe(30);
    expect(report.rounds).toHaveLength(1);
    expect(Object.keys(report.steps)).toEqual(["admit", "claim", "ledger", "credentials", "end"]);
    for (const cost of [...Object.values(report.steps), ...Object.values(report.alternatives)]) {
      expect(cost.dynamoDbLocal).toBeGreaterThanOrEqual(0);
      expect(cost.client).toBeGreaterThan(0);
    }
    expect(report.alternatives["ledger-credentials-transaction"]?.replaces.client).toBeCloseTo((report.steps.ledger?.client ?? 0) + (report.steps.credentials?.client ?? 0), 3);
    expect(await readFile(join(reportDir, "store-writes.md"), "utf8")).toMatch(/^# CPU of a provisioned host's DynamoDB writes$/m);
  }, 200_000);
});
