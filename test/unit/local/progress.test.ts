/**
 * The local run's progress output: the live line fitted to the terminal (the diagnosis kept, nothing
 * wrapped or left behind), plain lines while the run waits, what the hosts wait for in words, and a
 * summary whose counts add up to the fleet.
 */
import { describe, expect, it } from "vitest";
import { createProgressWriter, formatLifecycleEvents, formatSummary, HEARTBEAT_MS } from "../../../dev/local/progress";
import { describeRow, describeTakeover, describeWait, type RegistryRow, type WaitContext, type WaitGroup } from "../../../dev/local/registry-view";
import type { ProgressSnapshot, RunSummary } from "../../../dev/local/run";
import { formatStatusLine } from "../../../dev/local/status-line";
import { renderTerminal } from "../../support/terminal-screen";

const NOW = Date.parse("2026-12-01T17:01:00Z");
const CLAIM_TTL_MS = 15 * 60_000;
const STATUS_ROW = /^\[\s*[\d.]+s\] /;

function snapshot(overrides: Partial<ProgressSnapshot> = {}): ProgressSnapshot {
  return {
    elapsedMs: 12_300,
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
    ...overrides,
  };
}

const HELPER_ERROR = "helper: cannot read node output: zero bytes received; stderr: the site's helper refused the node";

/** A stalled run of 20 hosts: 9 provisioned, 11 waiting for two causes. */
const STALLED_GROUPS: WaitGroup[] = [
  { hosts: 5, text: "5 hosts to retry by 17:06:00", short: "5 to retry by 17:06:00", lastError: HELPER_ERROR },
  { hosts: 6, text: "6 hosts being provisioned by a running invocation, the oldest admitted 3 m ago", short: "6 being provisioned" },
];

function ttyStream(columns: number) {
  const chunks: string[] = [];
  const stream = { isTTY: true, columns, write: (chunk: string) => chunks.push(chunk) } as unknown as NodeJS.WriteStream;
  return { stream, text: () => chunks.join("") };
}

function plainStream() {
  const chunks: string[] = [];
  return { stream: { isTTY: false, write: (chunk: string) => chunks.push(chunk) } as unknown as NodeJS.WriteStream, text: () => chunks.join("") };
}

function context(overrides: Partial<WaitContext> = {}): WaitContext {
  return { now: NOW, lease: { holder: "primary", term: 1, expiresAt: NOW + 20_000 }, crashed: [], retryMaxDelayMs: 300_000, ...overrides };
}

function summaryOf(overrides: Partial<RunSummary>): RunSummary {
  return {
    outcome: "settled",
    elapsedMs: 40_000,
    total: 20,
    provisioned: 20,
    unprovisioned: [],
    lost: [],
    deadLetters: [],
    leaseChanges: [],
    failover: undefined,
    invocations: {},
    restartedAt: new Map(),
    startedAt: NOW - 40_000,
    provisioningMs: 10_000,
    ...overrides,
  };
}

describe("what the hosts wait for", () => {
  it("says what each group of unfinished hosts waits for, the groups adding up to them", () => {
    const attempt = (identity: string, admittedAgoMs: number): RegistryRow => ({
      identity,
      term: 1,
      state: "provisioning",
      admittedAt: NOW - admittedAgoMs,
      claimedUntil: NOW - admittedAgoMs + CLAIM_TTL_MS,
    });
    const rows = new Map<string, RegistryRow>([
      ...["a", "b", "c"].map((id, index): [string, RegistryRow] => [id, attempt(id, 180_000 - index * 10_000)]),
      ["d", { identity: "d", term: 1, state: "queued", admittedAt: NOW - 20_000, lastError: "rpcutil#inventory: timeout", lastErrorAt: NOW - 5_000 }],
      ["e", { identity: "e", term: 1, state: "queued", admittedAt: NOW - 5_000 }],
    ]);

    const groups = describeWait(["a", "b", "c", "d", "e", "f"], rows, context());

    expect(groups.map(({ text, lastError }) => [text, lastError])).toEqual([
      ["1 host to retry by 17:05:55", "rpcutil#inventory: timeout"],
      ["3 hosts being provisioned by a running invocation, the oldest admitted 3 m ago", undefined],
      ["1 host queued (admitted, work not taken yet)", undefined],
      ["1 host not admitted yet (waiting for discovery or a startup event)", undefined],
    ]);
    expect(groups.reduce((sum, group) => sum + group.hosts, 0)).toBe(6);
  });

  it("reads a claim left by a crashed leader, or from before a takeover, as what it is, not as a 15-minute wait", () => {
    const claimed = (identity: string, term: number): RegistryRow => ({ identity, term, state: "provisioning", admittedAt: NOW - 30_000, claimedUntil: NOW + CLAIM_TTL_MS - 30_000 });
    const rows = new Map([["a", claimed("a", 1)], ["b", claimed("b", 1)]]);

    const crashed = describeWait(["a", "b"], rows, context({ crashed: ["primary"] }));
    const afterTakeover = describeWait(["a", "b"], rows, context({ lease: { holder: "standby", term: 2, expiresAt: NOW + 30_000 }, crashed: ["primary"] }));

    expect(crashed.map((group) => group.text)).toEqual(["2 hosts claimed by primary, which crashed: a standby takes over once its lease runs out (at 17:01:20)"]);
    expect(afterTakeover.map((group) => group.text)).toEqual([
      "2 hosts claimed under term 1, before the takeover: the term 2 leader admits them again at its next discovery",
    ]);
    expect([...crashed, ...afterTakeover].map((group) => group.text).join()).not.toContain("17:15:30");
  });

  it("says a run with every host provisioned waits for the takeover it crashed the leader for", () => {
    expect(describeTakeover({ holder: "primary", expiresAt: NOW + 20_000 }, NOW)).toEqual({
      hosts: 0,
      text: "a standby to take over from primary, whose lease runs out at 17:01:20",
      short: "the takeover",
    });
  });

  it("shows a parked host's 14-day hold with its date, not as a time of day that reads as already past", () => {
    const parked: RegistryRow = { identity: "node3", term: 1, state: "parked", admittedAt: NOW - 2_000, heldUntil: NOW + 14 * 24 * 3_600_000 };

    const text = describeRow(parked, NOW);

    expect(text).toBe("parked (term 1), held until 2026-12-15 17:01 UTC (in 14 days), admitted 2 s ago");
  });
});

describe("the live line", () => {
  it("keeps what a stalled run waits for at 160 columns, with the error that causes it", () => {
    const line = formatStatusLine(snapshot({ total: 20, waiting: 0, inProgress: 6, retrying: 5, provisioned: 9, waitingFor: STALLED_GROUPS }), 159);

    expect(line.length).toBeLessThanOrEqual(159);
    expect(line).toContain("retrying 5");
    expect(line).toContain("leader primary");
    expect(line).toMatch(/ \| waiting for: 5 to retry by 17:06:00: helper: cannot read node output: zero bytes[^…]*…$/);
  });

  it("keeps the diagnosis at 80 columns: what the run waits for, with its cause, before any detail", () => {
    const line = formatStatusLine(snapshot({ total: 20, waiting: 0, inProgress: 6, retrying: 5, provisioned: 9, waitingFor: STALLED_GROUPS }), 79);

    expect(line.length).toBeLessThanOrEqual(79);
    expect(line).toMatch(/^\[ {2}12\.3s\] .*provisioned +9\/20 \| waiting for: 5 to retry by 17:06:00: helper: can[^…]*…$/);
    expect(line).not.toContain("invocations");
  });

  it("keeps the retry count, the failures and a missing or crashed leader at 80 columns; a live leader and zero counts give way first", () => {
    const busy = snapshot({ total: 20, waiting: 4, inProgress: 3, retrying: 2, failed: 1, provisioned: 10 });
    const leaderless = snapshot({ total: 100, waiting: 40, inProgress: 10, provisioned: 50, leader: undefined, term: undefined, crashed: ["primary"] });
    const healthy = snapshot({ total: 100, waiting: 60, inProgress: 30, provisioned: 10 });

    const lines = [busy, leaderless, healthy].map((each) => formatStatusLine(each, 79));

    for (const line of lines) expect(line.length).toBeLessThanOrEqual(79);
    expect(lines[0]).toMatch(/waiting +4 \| in progress +3 \| retrying +2 \| failed +1 \| provisioned +10\/20/);
    expect(lines[1]).toContain("no leader | crashed: primary");
    expect(lines[2]).toBe("[  12.3s] waiting  60 | in progress  30 | provisioned  10/100 | leader primary");
  });

  it("shows every part in full when the width allows", () => {
    expect(formatStatusLine(snapshot({ retrying: 2, inProgress: 4 }))).toBe(
      "[  12.3s] waiting   0 | in progress   4 | retrying   2 | failed   0 | provisioned  94/100 | leader primary term 1 | invocations 40",
    );
  });

  it("leaves no part of a line behind in an 80-column terminal, and draws none after the summary", () => {
    const { stream, text } = ttyStream(80);
    const writer = createProgressWriter({ stream });
    const long = snapshot({ total: 20, waiting: 4, inProgress: 3, retrying: 2, failed: 1, provisioned: 10, crashed: ["primary"] });

    writer.snapshot(long);
    writer.event("lease: standby leads with term 2");
    writer.snapshot({ ...long, elapsedMs: 13_000 });
    writer.finish();
    stream.write("\nSummary\n-------\nresult  10 of 20 nodes provisioned\n");
    writer.event("stopped in 0.4 s");
    const screen = renderTerminal(text(), 80);

    expect(screen.wrapped.filter((row) => STATUS_ROW.test(row))).toEqual([]);
    expect(screen.rows.filter((row) => STATUS_ROW.test(row))).toEqual([expect.stringMatching(/^\[ {2}13\.0s\] /)]);
    const summaryAt = screen.rows.indexOf("Summary");
    expect(screen.rows.slice(summaryAt).filter((row) => STATUS_ROW.test(row))).toEqual([]);
    expect(screen.rows.filter((row) => row !== "").at(-1)).toMatch(/Z stopped in 0\.4 s$/);
  });
});

describe("plain progress while the run waits", () => {
  it("prints a plain line at least every 10 s while nothing changes, naming what it waits for", () => {
    const { stream, text } = plainStream();
    const writer = createProgressWriter({ stream, plain: true });
    for (let ms = 0; ms <= 40_000; ms += 250) writer.snapshot(snapshot({ elapsedMs: ms, ...(ms >= 10_000 ? { waitingFor: STALLED_GROUPS.slice(1) } : {}) }));
    const stamps = text()
      .trim()
      .split("\n")
      .map((line) => Number(/^\[\s*([\d.]+)s\]/.exec(line)?.[1]) * 1000);
    const gaps = stamps.slice(1).map((at, index) => at - (stamps[index] as number));

    expect(stamps.length).toBeGreaterThanOrEqual(4);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(HEARTBEAT_MS);
    expect(text().trim().split("\n").at(-1)).toContain("waiting for: 6 hosts being provisioned by a running invocation, the oldest admitted 3 m ago");
  });
});

describe("the summary", () => {
  it("gives a result whose counts add up to the fleet, and says apart how many have no dead letter", () => {
    const node = (identity: string, state: RunSummary["unprovisioned"][number]["state"], deadLettered: boolean) => ({
      identity,
      reason: "-",
      deadLettered,
      state,
      registry: "-",
    });
    const unprovisioned = [
      ...Array.from({ length: 8 }, (_, index) => node(`p${index}`, "parked", true)),
      node("r1", "retrying", false),
      node("r2", "retrying", false),
      node("c1", "claimed", false),
    ];

    const text = formatSummary(summaryOf({ provisioned: 9, unprovisioned, lost: ["r1", "r2", "c1"] }));
    const result = /result\s+(\d+) of (\d+) nodes provisioned, (\d+) not: (.*)/.exec(text);
    const listed = [...(result?.[4] ?? "").matchAll(/(\d+) [a-z]/g)].reduce((sum, match) => sum + Number(match[1]), 0);

    expect(result?.[4]).toBe("8 parked in the DLQ, 2 retrying, 1 claimed");
    expect(Number(result?.[1]) + Number(result?.[3])).toBe(Number(result?.[2]));
    expect(listed).toBe(Number(result?.[3]));
    expect(text).toMatch(/no dead letter\s+3 of the 11 not provisioned/);
  });

  it("gives hosts per minute over the hosts' own time, not over a failover's wait after them", () => {
    const text = formatSummary(summaryOf({ provisioned: 100, total: 100, elapsedMs: 85_000, provisioningMs: 10_000 }));

    expect(text).toMatch(/hosts\/minute\s+600 \(100 hosts in 10\.0s, first request to last restart\)/);
  });

  it("accounts for every startup event published, those forwarded and not yet handled included", () => {
    const text = formatLifecycleEvents({
      published: 100,
      reachedLeader: { primary: 20, standby: 0 },
      droppedPaused: 0,
      deadLettered: 0,
      pendingInStream: 60,
      noneLost: false,
    });
    const counts = [...text.matchAll(/(\d+) (?:reached|dropped|dead-lettered|still|forwarded)/g)].map((match) => Number(match[1]));

    expect(text).toBe("100 published: 20 reached the leader (primary 20, standby 0), 60 still in the stream, 20 forwarded, not handled yet");
    expect(counts.reduce((sum, count) => sum + count, 0)).toBe(100);
  });

  it("shows each unfinished host's registry state and claim, not 'never contacted'", () => {
    const row: RegistryRow = { identity: "node7", term: 1, state: "provisioning", admittedAt: NOW - 180_000, claimedUntil: NOW + 720_000 };
    const text = formatSummary(
      summaryOf({
        outcome: "timeout",
        total: 2,
        provisioned: 1,
        unprovisioned: [{ identity: "node7", reason: "-", deadLettered: false, state: "claimed", registry: describeRow(row, NOW) }],
        lost: ["node7"],
      }),
    );

    expect(text).toMatch(/node7\s+claimed\s+provisioning \(term 1\), claimed until 17:13:00, admitted 3 m ago/);
    expect(text).toContain("1 of 2 nodes provisioned, 1 not: 1 claimed");
    expect(text).not.toContain("never contacted");
  });
});
