/**
 * Live progress for the local run: one rewritten status line on a terminal, plain lines otherwise
 * (when something changed, at most one every few seconds, and at least one every HEARTBEAT_MS so a
 * run that waits is seen waiting, with what it waits for), and a summary table at the end.
 */
import type { ProgressSnapshot, RunSummary } from "./run";

export interface ProgressWriter {
  snapshot(snapshot: ProgressSnapshot): void;
  event(message: string): void;
  /** Ends the live line so later output starts on a fresh line. */
  finish(): void;
}

export interface ProgressWriterOptions {
  stream?: NodeJS.WriteStream;
  /** Force plain lines even on a terminal. */
  plain?: boolean;
  /** Plain mode: least time between two lines. Default 5 s. */
  plainEveryMs?: number;
  /** Plain mode: longest time without a line. Default HEARTBEAT_MS. */
  heartbeatMs?: number;
}

export const HEARTBEAT_MS = 10_000;

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

function formatSnapshot(s: ProgressSnapshot): string {
  const width = String(s.total).length;
  const pad = (n: number) => String(n).padStart(width);
  const leader = s.leader === undefined ? "no leader" : `leader ${s.leader} term ${s.term}`;
  const crashed = s.crashed.length > 0 ? ` | crashed: ${s.crashed.join(",")}` : "";
  const waitingFor = s.waitingFor ? ` | waiting for: ${s.waitingFor}` : "";
  return (
    `[${seconds(s.elapsedMs).padStart(7)}] waiting ${pad(s.waiting)} | in progress ${pad(s.inProgress)} | ` +
    `provisioned ${pad(s.provisioned)}/${s.total} | failed ${s.failed} | retrying ${s.retrying} | ${leader} | invocations ${s.invocations}${crashed}${waitingFor}`
  );
}

export function createProgressWriter(options: ProgressWriterOptions = {}): ProgressWriter {
  const stream = options.stream ?? process.stdout;
  const live = stream.isTTY === true && !options.plain;
  let lastLine = "";
  let lastKey = "";
  let lastPlainAt = 0;
  let lineOpen = false;

  const clear = () => {
    if (live && lineOpen) {
      stream.write("\r\x1b[2K");
      lineOpen = false;
    }
  };

  return {
    snapshot(snapshot) {
      const line = formatSnapshot(snapshot);
      if (live) {
        const columns = stream.columns ?? 200;
        stream.write(`\r\x1b[2K${line.slice(0, Math.max(20, columns - 1))}`);
        lineOpen = true;
        lastLine = line;
        return;
      }
      const key = `${snapshot.waiting}/${snapshot.inProgress}/${snapshot.provisioned}/${snapshot.failed}/${snapshot.retrying}/${snapshot.leader}/${snapshot.term}/${snapshot.waitingFor}`;
      const since = snapshot.elapsedMs - lastPlainAt;
      const changed = key !== lastKey && (since >= (options.plainEveryMs ?? 5_000) || snapshot.provisioned === snapshot.total || lastKey === "");
      if (changed || since >= (options.heartbeatMs ?? HEARTBEAT_MS)) {
        stream.write(`${line}\n`);
        lastKey = key;
        lastPlainAt = snapshot.elapsedMs;
      }
    },
    event(message) {
      clear();
      stream.write(`${new Date().toISOString()} ${message}\n`);
      if (live && lastLine) {
        stream.write(lastLine);
        lineOpen = true;
      }
    },
    finish() {
      if (live && lineOpen) stream.write("\n");
      lineOpen = false;
    },
  };
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd()).join("\n");
}

/** The end-of-run summary: outcome, lease history, failover, invocations and every unprovisioned node. */
export function formatSummary(summary: RunSummary, extra: Array<[string, string]> = []): string {
  const lines: string[] = [];
  const verdict =
    summary.provisioned === summary.total
      ? `all ${summary.total} nodes provisioned`
      : `${summary.provisioned} of ${summary.total} nodes provisioned, ${summary.unprovisioned.length} not: ` +
        `${summary.unprovisioned.filter((node) => node.state === "parked").length} parked in the DLQ, ` +
        `${summary.unprovisioned.filter((node) => node.state === "retrying").length} retrying, ` +
        `${summary.unprovisioned.filter((node) => node.state === "claimed").length} claimed, ${summary.lost.length} with no dead letter`;
  lines.push("", "Summary", "-------");
  lines.push(
    table([
      ["outcome", summary.outcome],
      ["result", verdict],
      ["elapsed", seconds(summary.elapsedMs)],
      ["hosts/minute", summary.elapsedMs > 0 ? ((summary.provisioned / summary.elapsedMs) * 60_000).toFixed(0) : "-"],
      ...summary.leaseChanges.map((change): [string, string] => [`lease @${seconds(change.atMs)}`, `${change.holder} term ${change.term}`]),
      ...(summary.failover
        ? [
            [
              "failover",
              summary.failover.tookMs === undefined
                ? `${summary.failover.killed} crashed at ${seconds(summary.failover.killedAtMs)}; no standby took over`
                : `${summary.failover.killed} crashed at ${seconds(summary.failover.killedAtMs)}; ${summary.failover.newLeader} took over in ${seconds(summary.failover.tookMs)} (term ${summary.failover.newTerm})`,
            ] as [string, string],
          ]
        : []),
      ...extra,
    ]),
  );
  lines.push("", "Invocations");
  lines.push(
    table([
      ["function", "invocations", "failed", "GB-s"],
      ...Object.entries(summary.invocations).map(([name, figures]) => [
        name,
        String(figures.invocations),
        String(figures.failed),
        figures.gbSeconds.toFixed(1),
      ]),
    ]),
  );
  if (summary.unprovisioned.length > 0) {
    lines.push("", "Not provisioned (registry entry and last error of each)");
    const shown = summary.unprovisioned.slice(0, 50);
    lines.push(
      table([
        ["node", "state", "registry", "step", "failures", "last error"],
        ...shown.map((node) => [
          node.identity,
          node.state,
          node.registry,
          node.failedStep ?? "-",
          node.failures === undefined ? "-" : String(node.failures),
          node.reason,
        ]),
      ]),
    );
    if (summary.unprovisioned.length > shown.length) lines.push(`... and ${summary.unprovisioned.length - shown.length} more`);
  }
  return lines.join("\n");
}
