/**
 * `npm run bench:peer -- --markdown-only` (PEER_USAGE; docs/testing.md, "Benchmarks") run as an
 * operator runs it, on a copy of the recorded report in a directory of its own (--report-dir), so
 * the checkout's reports/ are never rewritten: peer.md and the fleet summaries in peer.json come
 * again from the copy's pairs. Starts no service and needs no Go: it only reads and writes the report.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Report } from "../../../bench/peer-report";
import { failureOf, npmScript, REPO_ROOT, temporaryDirs } from "../../support/npm-script";

const RECORDED = join(REPO_ROOT, "reports/peer.json");
/** What the copy's bash + jq pairs of its first fleet are set to: their median is 0.73, their spread 0.61-0.97. */
const RATIOS = [0.61, 0.97, 0.73];

const peer = (...args: string[]) => npmScript("bench:peer", args, { timeoutMs: 60_000 });
const peerFailure = (...args: string[]) => failureOf("bench:peer", args, { timeoutMs: 60_000 });

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
  const temporaryDir = temporaryDirs("peer-markdown-only-");

  it("rewrites peer.md and peer.json's fleet summaries in --report-dir from that copy's pairs, and leaves reports/ alone", async () => {
    // Arrange
    const reportDir = await temporaryDir();
    const checkout = { json: await readFile(RECORDED, "utf8"), markdown: await readFile(join(REPO_ROOT, "reports/peer.md"), "utf8") };
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
    expect(await readFile(join(REPO_ROOT, "reports/peer.md"), "utf8")).toBe(checkout.markdown);
  }, 90_000);

  it("a report directory without peer.json is a usage mistake: one line naming the file and what records it, exit 2", async () => {
    // Arrange
    const reportDir = await temporaryDir();

    // Act
    const failure = await peerFailure("--markdown-only", "--report-dir", reportDir);

    // Assert
    expect(failure?.code).toBe(2);
    expect(failure?.stderr?.trim()).toBe(
      `bench:peer: --markdown-only works on ${join(reportDir, "peer.json")}, which does not exist: run \`npm run bench:peer\` with the same --report-dir first`,
    );
  }, 90_000);

  it("a peer.json that is not JSON, or has no pairs, is named the same way", async () => {
    // Arrange
    const reportDir = await temporaryDir();
    await writeFile(join(reportDir, "peer.json"), "{ not json");
    const notJson = await peerFailure("--markdown-only", "--report-dir", reportDir);
    await writeFile(join(reportDir, "peer.json"), JSON.stringify({ fleets: [{ fleet: "simulator-1000" }] }));

    // Act
    const noPairs = await peerFailure("--markdown-only", "--report-dir", reportDir);

    // Assert
    expect(notJson?.code).toBe(2);
    expect(notJson?.stderr).toMatch(/^bench:peer: --markdown-only works on .*peer\.json, which is not JSON \(/);
    expect(noPairs?.code).toBe(2);
    expect(noPairs?.stderr?.trim()).toContain("which has no pairs recorded per fleet: run `npm run bench:peer`");
  }, 90_000);
});
