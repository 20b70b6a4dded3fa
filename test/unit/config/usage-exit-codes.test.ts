/**
 * One exit code for a usage mistake across the project's commands: 2, as the operator CLI and
 * `npm run local` use it, so a script can tell "you called me wrong" from "the run failed" (1).
 * Before, scripts/sls-local.sh and check-config exited 64, and the commands that let Node's
 * argument parser throw exited 1 with a stack trace, after loading everything.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
const USAGE_ERROR = 2;

interface Outcome {
  code: number;
  stderr: string;
}

/** Runs a command from the repository root with only PATH and HOME set, so no exported setting helps it along. */
async function outcomeOf(file: string, args: readonly string[]): Promise<Outcome> {
  const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" };
  return promisify(execFile)(file, [...args], { cwd: ROOT, env, timeout: 60_000 }).then(
    ({ stderr }) => ({ code: 0, stderr }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );
}

const tsx = (script: string, ...args: string[]): [string, string[]] => [process.execPath, ["--import", "tsx", script, ...args]];

describe("a usage mistake exits 2 in every command", () => {
  it.concurrent.each<[string, [string, string[]], RegExp]>([
    ["check-config, an unknown option", tsx("scripts/check-config.ts", "--bogus", "config/local.yaml"), /^check-config: unknown option --bogus$/],
    ["scripts/sls-local.sh, no function", ["bash", ["scripts/sls-local.sh"]], /^usage: scripts\/sls-local\.sh <function>/],
    ["scripts/sls-local.sh, the services' exports missing", ["bash", ["scripts/sls-local.sh", "status"]], /is not set: start scripts\/local-services\.ts/],
    ["npm run local, a bad value", tsx("scripts/local.ts", "--nodes", "0"), /^npm run local: --nodes must be a positive number/],
    ["npm run local:services, an unknown option", tsx("scripts/local-services.ts", "--bogus"), /^local services: Unknown option '--bogus'/],
    // Checked before anything starts: it used to be read once the prerequisites were in place.
    ["npm run local:services, a bad port", tsx("scripts/local-services.ts", "--nats-port", "0"), /^local services: --nats-port must be a port number/],
    ["scripts/sqs-event.ts, an unknown option", tsx("scripts/sqs-event.ts", "--bogus"), /^sqs-event: Unknown option '--bogus'/],
    ["npm run bench, an unknown option", tsx("bench/pipeline.ts", "--bogus"), /^bench: Unknown option '--bogus'/],
    ["npm run bench, a bad size", tsx("bench/pipeline.ts", "--sizes", "100,many"), /^bench: --sizes must be whole numbers of at least 1 separated by commas, not 100,many$/],
    ["npm run bench, a run the matrix does not have", tsx("bench/pipeline.ts", "--sizes", "100", "--only", "bash-1000"), /^bench: --only bash-1000 names no run of this matrix \(bash-100, /],
    ["npm run bench:cost, an unknown option", tsx("bench/cost.ts", "--bogus"), /^bench:cost: Unknown option '--bogus'/],
    ["npm run bench:cost, a bad value", tsx("bench/cost.ts", "--nodes", "0"), /^bench:cost: --nodes must be a whole number of at least 1, not 0$/],
    ["npm run bench:cost, a bad fractional value", tsx("bench/cost.ts", "--idle-minutes", "0"), /^bench:cost: --idle-minutes must be a number above 0, not 0$/],
    ["npm run bench:failover, an unknown option", tsx("bench/failover.ts", "--bogus"), /^bench:failover: Unknown option '--bogus'/],
    ["npm run bench:failover, a bad value", tsx("bench/failover.ts", "--runs", "0"), /^bench:failover: --runs must be a whole number of at least 1, not 0$/],
    ["npm run bench:failover, an unknown profile", tsx("bench/failover.ts", "--profiles", "short,long"), /^bench:failover: --profiles takes names from default, short, not short,long$/],
    ["npm run bench:peer, an unknown option", tsx("bench/peer.ts", "--bogus"), /^bench:peer: Unknown option '--bogus'/],
    ["npm run bench:peer, a bad value", tsx("bench/peer.ts", "--pairs", "0"), /^bench:peer: --pairs must be a whole number of at least 1, not 0$/],
    ["npm run bench:peer, a bad fractional value", tsx("bench/peer.ts", "--max-start-load", "high"), /^bench:peer: --max-start-load must be a number of at least 0, not high$/],
    ["npm run bench:store-writes, an unknown option", tsx("bench/store-writes.ts", "--bogus"), /^bench:store-writes: Unknown option '--bogus'/],
    ["npm run bench:store-writes, a bad value", tsx("bench/store-writes.ts", "--hosts", "0"), /^bench:store-writes: --hosts must be a whole number of at least 1, not 0$/],
    ["npm run bench:wire, an unknown option", tsx("bench/wire.ts", "--bogus"), /^bench:wire: Unknown option '--bogus'/],
    ["npm run bench:wire, a bad value", tsx("bench/wire.ts", "--calls", "3"), /^bench:wire: --calls must be a whole number of at least 8, not 3$/],
    ["npm run bench:cli, an unknown option", tsx("bench/cli-start.ts", "--bogus"), /^bench:cli: Unknown option '--bogus'/],
    // Checked before the services start: it used to be thrown, with a stack trace.
    ["npm run bench:cli, a bad value", tsx("bench/cli-start.ts", "--runs", "0"), /^bench:cli: --runs must be a whole number of at least 1, not 0$/],
    ["npm run bench:calendar, an unknown option", tsx("bench/renew-calendar.ts", "--bogus"), /^bench:calendar: Unknown option '--bogus'/],
    // It used to be thrown, with a stack trace and exit 1.
    ["npm run bench:calendar, a bad value", tsx("bench/renew-calendar.ts", "--runs", "0"), /^bench:calendar: --runs must be a whole number of at least 1, not 0$/],
    ["bench/helper-launch.ts, an unknown option", tsx("bench/helper-launch.ts", "--bogus"), /^helper-launch: Unknown option '--bogus'/],
    // It used to be taken as it came: no run at all, or NaN of them.
    ["bench/helper-launch.ts, a bad value", tsx("bench/helper-launch.ts", "--runs", "0"), /^helper-launch: --runs must be a whole number of at least 1, not 0$/],
    ["npm run realfleet, an unknown option", tsx("scripts/realfleet.ts", "--bogus"), /^Unknown option '--bogus'/],
    ["scripts/soak.ts, an unknown option", tsx("scripts/soak.ts", "--bogus"), /^soak: Unknown option '--bogus'/],
    ["scripts/bundle-report.ts, an unknown option", tsx("scripts/bundle-report.ts", "--bogus"), /^bundle-report: Unknown option '--bogus'/],
    ["scripts/reliability-report.ts, an unknown option", tsx("scripts/reliability-report.ts", "--bogus"), /^reliability-report: Unknown option '--bogus'/],
  ])("%s", async (_case, [file, args], firstLine) => {
    // Act
    const { code, stderr } = await outcomeOf(file, args);

    // Assert: the mistake named on the first line, and no stack trace.
    expect(code).toBe(USAGE_ERROR);
    expect(stderr.split("\n")[0]).toMatch(firstLine);
    expect(stderr).not.toMatch(/^\s+at /m);
  }, 90_000);

  it("npm run bench:peer: the one line is all a usage mistake prints (it used to print the usage text after it)", async () => {
    // Act
    const { code, stderr } = await outcomeOf(...tsx("bench/peer.ts", "--pairs", "0"));

    // Assert
    expect(code).toBe(USAGE_ERROR);
    expect(stderr).toBe("bench:peer: --pairs must be a whole number of at least 1, not 0\n");
  }, 90_000);

  it("npm run local:services -- --help prints its options and succeeds, starting nothing", async () => {
    // Act: execFile rejects on any exit code but 0.
    const { stdout } = await promisify(execFile)(...tsx("scripts/local-services.ts", "--help"), { cwd: ROOT });

    // Assert
    expect(stdout).toMatch(/^Usage: npm run local:services -- \[options\]/);
    expect(stdout).toContain("--nats-port N");
  }, 90_000);
});

describe("npm run bench names what is wrong with its inputs in one line, before anything starts", () => {
  const reportDirs: string[] = [];
  const reportDir = async (benchJson?: string) => {
    const dir = await mkdtemp(join(tmpdir(), "bench-usage-"));
    reportDirs.push(dir);
    if (benchJson !== undefined) await writeFile(join(dir, "bench.json"), benchJson);
    return dir;
  };
  afterAll(async () => {
    await Promise.all(reportDirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("--markdown-only without a bench.json names the file and what writes it", async () => {
    // Arrange
    const dir = await reportDir();

    // Act
    const { code, stderr } = await outcomeOf(...tsx("bench/pipeline.ts", "--markdown-only", "--report-dir", dir));

    // Assert: one line, no stack trace.
    expect(code).toBe(USAGE_ERROR);
    expect(stderr).toBe(`bench: --markdown-only reads ${join(dir, "bench.json")}, which does not exist: run \`npm run bench\` with the same --report-dir first\n`);
  }, 90_000);

  it.each([
    ["not JSON", "{ runs: [", /is not JSON \(/],
    ["JSON but not a bench report", JSON.stringify({ generatedAt: "2026-01-01T00:00:00Z", nodes: 2000 }), /is not a bench report \(/],
  ])("--markdown-only with a bench.json that is %s names the file", async (_case, content, what) => {
    // Arrange
    const dir = await reportDir(content);

    // Act
    const { code, stderr } = await outcomeOf(...tsx("bench/pipeline.ts", "--markdown-only", "--report-dir", dir));

    // Assert
    expect(code).toBe(USAGE_ERROR);
    expect(stderr.split("\n")).toHaveLength(2);
    expect(stderr).toMatch(new RegExp(`^bench: ${join(dir, "bench.json").replaceAll(".", "\\.")} ${what.source}`));
  }, 90_000);

  it("bad BENCH_* settings are all named in one message", async () => {
    // Arrange: `env` adds the settings to the bare environment outcomeOf gives. The --only mistake
    // is checked after the settings (the matrix is built from them), so it is not in the message.
    const settings = ["BENCH_DEFAULT_CONCURRENCY=ten", "BENCH_HELPERS=inline,perl", "BENCH_SKIP_PROFILE=yes"];
    const [node, args] = tsx("bench/pipeline.ts", "--sizes", "100", "--only", "not-a-run");

    // Act
    const { code, stderr } = await outcomeOf("env", [...settings, node, ...args]);

    // Assert: each setting with its value and what it takes, on the one line.
    expect(code).toBe(USAGE_ERROR);
    expect(stderr.split("\n")).toHaveLength(2);
    expect(stderr).toMatch(/^bench: /);
    expect(stderr).toContain("BENCH_DEFAULT_CONCURRENCY must be a whole number of at least 1, not ten");
    expect(stderr).toContain("BENCH_HELPERS takes names from inline, node (empty for none), not inline,perl");
    expect(stderr).toContain("BENCH_SKIP_PROFILE must be true or false, not yes");
  }, 90_000);
});
