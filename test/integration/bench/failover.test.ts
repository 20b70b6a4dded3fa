/**
 * `npm run bench:failover` (docs/testing.md, Benchmarks) runs as documented: a leader crashes, a
 * standby takes the lease over under a new term, and the time from the leader's last renewal to the
 * standby's open gate falls within what the lease protocol allows (docs/lease.md, "Failover time").
 * One failover on the short profile: a minute or two before the crash (a random phase of both
 * keepers' minute schedules), then under a minute to the takeover, so the run takes 2-3 minutes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmScript, temporaryDirs } from "../../support/npm-script";

/** The short profile as bench/failover.ts configures it (lease 25 s, renew 5 s, skew 2 s), with `rpc_ttl`'s default 30 s as the delivery horizon. */
const SHORT = { leaseDurationMs: 25_000, keepIntervalMs: 5_000, skewBoundMs: 2_000, deliveryHorizonMs: 30_000 };
/** The leaseKeeper function's schedule: each deployment's keeper runs once a minute. */
const KEEPER_MINUTE_MS = 60_000;
/** Every gate round is bounded (docs/lease.md: `roundTimeoutMs`, 4 s in the App). */
const ROUND_BOUND_MS = 4_000;
const IDLE_WINDOW_MS = 30_000;

interface Run {
  lastKeepToOpenMs: number;
  crashToOpenMs: number;
  leaderTerm: number;
  newTerm: number;
}

interface FailoverReport {
  command: string;
  failover_s?: number;
  profiles: Array<typeof SHORT & { name: string; runs: Run[] }>;
  idle: { windowMs: number; requestsByCommand: Record<string, number> };
}

describe("bench:failover", () => {
  const temporaryDir = temporaryDirs("failover-");

  it("times a standby's takeover under a new term within the protocol's bound, and writes its report where told", async () => {
    // Arrange
    const reportDir = await temporaryDir();
    const options = ["--profiles", "short", "--runs", "1", "--idle-ms", String(IDLE_WINDOW_MS), "--report-dir", reportDir];

    // Act
    const { stdout } = await npmScript("bench:failover", options, { timeoutMs: 270_000 });

    // Assert: what it prints is the report it wrote, for the one profile and run asked for.
    const report = JSON.parse(stdout) as FailoverReport;
    expect(JSON.parse(await readFile(join(reportDir, "failover.json"), "utf8"))).toEqual(report);
    expect(report.command).toBe(`npm run bench:failover -- ${options.join(" ")}`);
    expect(report.profiles.map(({ name, leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs }) => ({ name, leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs }))).toEqual([{ name: "short", ...SHORT }]);
    // The defaults did not run, so no figure claims to be theirs.
    expect(report).not.toHaveProperty("failover_s");
    const [run, ...more] = report.profiles[0]?.runs ?? [];
    expect(more).toEqual([]);
    expect(run?.leaderTerm).toBeGreaterThanOrEqual(1);
    expect(run?.newTerm).toBeGreaterThan(run?.leaderTerm ?? Infinity);
    // Nobody may claim before lease + skew + horizon after the last renewal. The standby's keeper
    // runs within a minute of that renewal: before the lease is claimable it arms a tick for that
    // moment (delays are whole seconds), after it it takes over itself; then one bounded round.
    const claimable = SHORT.leaseDurationMs + SHORT.skewBoundMs + SHORT.deliveryHorizonMs;
    expect(run?.lastKeepToOpenMs).toBeGreaterThanOrEqual(claimable);
    expect(run?.lastKeepToOpenMs).toBeLessThanOrEqual(Math.max(claimable + 1_000, KEEPER_MINUTE_MS) + ROUND_BOUND_MS);
    expect(run?.crashToOpenMs).toBeLessThanOrEqual(run?.lastKeepToOpenMs ?? 0);
    // The idle part counted the lease traffic of its shortened window: pause-switch reads and lease writes.
    expect(report.idle.windowMs).toBe(IDLE_WINDOW_MS);
    expect(report.idle.requestsByCommand.GetItemCommand).toBeGreaterThan(0);
    expect(report.idle.requestsByCommand.UpdateItemCommand).toBeGreaterThan(0);
    const markdown = await readFile(join(reportDir, "failover.md"), "utf8");
    expect(markdown).toMatch(/^# Lease failover benchmark$/m);
    expect(markdown).toMatch(/^\| short \| 25\.0 s \/ 5\.0 s \/ 2\.0 s \/ 30\.0 s \| 1 \|/m);
  }, 300_000);
});
