/**
 * `npm run bench:store-writes` (docs/behaviour.md §2, "Writes per host") runs as documented: it
 * takes hosts through the product's five writes and the two joined alternatives against DynamoDB
 * Local, and reports a CPU figure for each, for DynamoDB Local and for the client.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmScript, temporaryDirs } from "../../support/npm-script";


describe("bench:store-writes", () => {
  const temporaryDir = temporaryDirs("store-writes-");

  it("reports the CPU of each of a host's writes and of each joined alternative, and writes its report where told", async () => {
    // Arrange
    const reportDir = await temporaryDir();

    // Act
    const { stdout } = await npmScript("bench:store-writes", ["--hosts", "30", "--rounds", "1", "--report-dir", reportDir], { timeoutMs: 180_000 });

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
