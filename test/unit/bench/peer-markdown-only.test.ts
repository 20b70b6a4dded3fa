/**
 * `npm run bench:peer -- --markdown-only` (PEER_USAGE; docs/testing.md, "Benchmarks") run as an
 * operator runs it, on a copy of the recorded report in a directory of its own (--report-dir), so
 * the checkout's reports/ are never rewritten: peer.md and the fleet summaries in peer.json come
 * again from the copy's pairs. Starts no service and needs no Go: it only reads and writes the report.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import type { Report } from "../../../bench/peer-report";

const ROOT = resolve(import.meta.dirname, "../../..");
const RECORDED = join(ROOT, "reports/peer.json");
/** What the copy's bash + jq pairs of its first fleet are set to: their median is 0.73, their spread 0.61-0.97. */
const RATIOS = [0.61, 0.97, 0.73];

const peer = (...args: string[]) =>
  promisify(execFile)("npm", ["run", "--silent", "bench:peer", "--", ...args], { cwd: ROOT, env: { ...process.env, npm_config_update_notifier: "false" }, timeout: 60_000 });

/** The recorded report with the first fleet's bash + jq default pairs given RATIOS, counted; its stored summary is left as recorded, stale. */
function withRatios(recorded: Report): Report {
  const [first, ...rest] = recorded.fleets;
  if (!first) throw new Error(`${RECORDED} has no fleet to copy`);
  let next = 0;
  const pairs = first.pairs.map((pair) => {
    if (pair.helper !== "bash" || pair.config !== "default" || next >= RATIOS.length) return pair;
    return { ...pair, ratio: RATIOS[next++] ?? null, counted: true };
  });
  if (next < RATIOS.length) throw new Error(`${RECORDED}'s first fleet has fewer than ${RATIOS.length} bash + jq default pairs`);
  return { ...recorded, fleets: [{ ...first, pairs }, ...rest] };
}

describe("bench:peer --markdown-only", () => {
  let reportDir: string | undefined;
  afterEach(async () => {
    if (reportDir) await rm(reportDir, { recursive: true, force: true });
  });

  it("rewrites peer.md and peer.json's fleet summaries in --report-dir from that copy's pairs, and leaves reports/ alone", async () => {
    // Arrange
    reportDir = await mkdtemp(join(tmpdir(), "peer-markdown-only-"));
    const checkout = { json: await readFile(RECORDED, "utf8"), markdown: await readFile(join(ROOT, "reports/peer.md"), "utf8") };
    const copy = withRatios(JSON.parse(checkout.json) as Report);
    await writeFile(join(reportDir, "peer.json"), JSON.stringify(copy));
    const fleet = copy.fleets[0]?.fleet;

    // Act: execFile rejects on any exit code but 0.
    const { stdout } = await peer("--markdown-only", "--report-dir", reportDir);

    // Assert: the median and spread of the copy's pairs, in both files; the checkout's report as it was.
    expect(stdout).toContain(`rewrote peer.md and the fleet summaries in peer.json from its pairs, in ${reportDir}`);
    expect(await readFile(join(reportDir, "peer.md"), "utf8")).toContain(`| ${fleet} | **0.73** (0.61-0.97, 3 pairs) |`);
    const rewritten = JSON.parse(await readFile(join(reportDir, "peer.json"), "utf8")) as Report;
    expect(rewritten.fleets[0]).toMatchObject({ fleet, median_ratio_hosts_per_min: 0.73, spread: { bash: { median: 0.73, min: 0.61, max: 0.97, counted: 3 } } });
    expect(await readFile(RECORDED, "utf8")).toBe(checkout.json);
    expect(await readFile(join(ROOT, "reports/peer.md"), "utf8")).toBe(checkout.markdown);
  }, 90_000);

  it("a report directory without peer.json is a usage mistake: one line naming the file and what records it, exit 2", async () => {
    // Arrange
    reportDir = await mkdtemp(join(tmpdir(), "peer-markdown-only-"));

    // Act
    const failure = await peer("--markdown-only", "--report-dir", reportDir).then(
      () => undefined,
      (error: { code?: number; stderr?: string }) => error,
    );

    // Assert
    expect(failure?.code).toBe(2);
    expect(failure?.stderr?.trim()).toBe(
      `bench:peer: --markdown-only works on ${join(reportDir, "peer.json")}, which does not exist: run \`npm run bench:peer\` with the same --report-dir first`,
    );
  }, 90_000);

  it("a peer.json that is not JSON, or has no pairs, is named the same way", async () => {
    // Arrange
    reportDir = await mkdtemp(join(tmpdir(), "peer-markdown-only-"));
    await writeFile(join(reportDir, "peer.json"), "{ not json");
    const notJson = await peer("--markdown-only", "--report-dir", reportDir).then(() => undefined, (error: { code?: number; stderr?: string }) => error);
    await writeFile(join(reportDir, "peer.json"), JSON.stringify({ fleets: [{ fleet: "simulator-1000" }] }));

    // Act
    const noPairs = await peer("--markdown-only", "--report-dir", reportDir).then(() => undefined, (error: { code?: number; stderr?: string }) => error);

    // Assert
    expect(notJson?.code).toBe(2);
    expect(notJson?.stderr).toMatch(/^bench:peer: --markdown-only works on .*peer\.json, which is not JSON \(/);
    expect(noPairs?.code).toBe(2);
    expect(noPairs?.stderr?.trim()).toContain("which has no pairs recorded per fleet: run `npm run bench:peer`");
  }, 90_000);
});
