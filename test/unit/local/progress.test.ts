/**
 * The local run's progress output when the run waits: plain mode keeps printing (with what the hosts
 * wait for), and the summary shows each unfinished host's registry entry and claim.
 */
import { describe, expect, it } from "vitest";
import { createProgressWriter, formatSummary, HEARTBEAT_MS } from "../../../dev/local/progress";
import { describeRow, describeWait, type RegistryRow } from "../../../dev/local/registry-view";
import type { ProgressSnapshot, RunSummary } from "../../../dev/local/run";

const NOW = Date.parse("2026-12-01T17:01:00Z");

function snapshot(elapsedMs: number, waitingFor?: string): ProgressSnapshot {
  return {
    elapsedMs,
    total: 100,
    waiting: 0,
    inProgress: 6,
    provisioned: 94,
    failed: 0,
    retrying: 0,
    leader: "primary",
    term: 1,
    invocations: 40,
    crashed: [],
    ...(waitingFor === undefined ? {} : { waitingFor }),
  };
}

function memoryStream() {
  const chunks: string[] = [];
  return { stream: { isTTY: false, write: (chunk: string) => chunks.push(chunk) } as unknown as NodeJS.WriteStream, text: () => chunks.join("") };
}

describe("local run progress while it waits", () => {
  it("says which hosts are claimed until when and how old the oldest is", () => {
    const claimed = (identity: string, admittedAgoMs: number): RegistryRow => ({
      identity,
      term: 1,
      state: "provisioning",
      admittedAt: NOW - admittedAgoMs,
      claimedUntil: Date.parse("2026-12-01T17:04:00Z"),
    });
    const rows = new Map<string, RegistryRow>([
      ...["a", "b", "c", "d", "e", "f"].map((id, index): [string, RegistryRow] => [id, claimed(id, 180_000 - index * 10_000)]),
      ["g", { identity: "g", term: 1, state: "queued", admittedAt: NOW - 5_000 }],
    ]);

    expect(describeWait(["a", "b", "c", "d", "e", "f", "g", "h"], rows, NOW)).toBe(
      "6 hosts claimed until 17:04:00, oldest admitted 3 m ago; 1 host queued; 1 host not in the registry yet (waiting for discovery or a startup event)",
    );
  });

  it("prints a plain line at least every 10 s while nothing changes, naming what it waits for", () => {
    const { stream, text } = memoryStream();
    const writer = createProgressWriter({ stream, plain: true });
    for (let ms = 0; ms <= 40_000; ms += 250) writer.snapshot(snapshot(ms, ms >= 10_000 ? "6 hosts claimed until 17:04:00" : undefined));
    const stamps = text()
      .trim()
      .split("\n")
      .map((line) => Number(/^\[\s*([\d.]+)s\]/.exec(line)?.[1]) * 1000);
    const gaps = stamps.slice(1).map((at, index) => at - (stamps[index] as number));

    expect(stamps.length).toBeGreaterThanOrEqual(4);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(HEARTBEAT_MS);
    expect(text().trim().split("\n").at(-1)).toContain("waiting for: 6 hosts claimed until 17:04:00");
  });

  it("shows each unfinished host's registry state and claim in the summary, not 'never contacted'", () => {
    const row: RegistryRow = { identity: "node7", term: 1, state: "provisioning", admittedAt: NOW - 180_000, claimedUntil: NOW + 720_000 };
    const summary: RunSummary = {
      outcome: "timeout",
      elapsedMs: 600_000,
      total: 2,
      provisioned: 1,
      unprovisioned: [{ identity: "node7", reason: "claimed", deadLettered: false, state: "claimed", registry: describeRow(row, NOW) }],
      lost: ["node7"],
      deadLetters: [],
      leaseChanges: [],
      failover: undefined,
      invocations: {},
      restartedAt: new Map(),
      startedAt: NOW - 600_000,
    };

    const text = formatSummary(summary);

    expect(text).toMatch(/node7\s+claimed\s+provisioning \(term 1\), claimed until 17:13:00, admitted 3 m ago/);
    expect(text).toContain("1 claimed");
    expect(text).not.toContain("never contacted");
  });
});
