/**
 * Live progress for the local run: one rewritten status line on a terminal, fitted to its width
 * (detail gives way before the diagnosis, and nothing wraps, so each rewrite replaces the whole
 * line), plain lines otherwise (when something changed, at most one every few seconds, and at least
 * one every HEARTBEAT_MS so a run that waits is seen waiting, with what it waits for), and a summary
 * table at the end whose counts add up to the fleet.
 */
import type { ProgressSnapshot, RunSummary } from "./run";
import type { LifecycleEventCount } from "./stack";
import { formatStatusLine, seconds } from "./status-line";

export interface ProgressWriter {
  snapshot(snapshot: ProgressSnapshot): void;
  /** A line of its own, above the live line (which is drawn again below it until `finish`). */
  event(message: string): void;
  /** What the run is doing now, in place of the live line (a plain line when not live); ended by `event` or `finish`. */
  status(text: string): void;
  /** Ends the live line so later output starts on a fresh line; later events no longer redraw it. */
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

export function createProgressWriter(options: ProgressWriterOptions = {}): ProgressWriter {
  const stream = options.stream ?? process.stdout;
  const live = stream.isTTY === true && !options.plain;
  // A terminal that reports no size (a pty nobody sized, as under `script` without a terminal) is
  // taken at $COLUMNS, else 80. One column short: a line that fills the last one leaves some
  // terminals wrapped.
  const width = () => Math.max(20, (stream.columns || Number(process.env.COLUMNS) || 80) - 1);
  let shown: ProgressSnapshot | undefined;
  let lastKey = "";
  let lastPlainAt = 0;
  let lineOpen = false;
  let finished = false;

  const draw = (text: string) => {
    stream.write(`\r\x1b[2K${text}`);
    lineOpen = true;
  };
  const clear = () => {
    if (live && lineOpen) {
      stream.write("\r\x1b[2K");
      lineOpen = false;
    }
  };

  return {
    snapshot(snapshot) {
      if (live) {
        shown = snapshot;
        draw(formatStatusLine(snapshot, width()));
        return;
      }
      const key = `${snapshot.waiting}/${snapshot.inProgress}/${snapshot.provisioned}/${snapshot.failed}/${snapshot.retrying}/${snapshot.leader}/${snapshot.term}/${snapshot.waitingFor?.map((group) => group.text).join()}`;
      const since = snapshot.elapsedMs - lastPlainAt;
      const changed = key !== lastKey && (since >= (options.plainEveryMs ?? 5_000) || snapshot.provisioned === snapshot.total || lastKey === "");
      if (changed || since >= (options.heartbeatMs ?? HEARTBEAT_MS)) {
        stream.write(`${formatStatusLine(snapshot)}\n`);
        lastKey = key;
        lastPlainAt = snapshot.elapsedMs;
      }
    },
    event(message) {
      clear();
      stream.write(`${new Date().toISOString()} ${message}\n`);
      // Fitted again: the terminal may have been narrowed since the line was drawn.
      if (live && shown && !finished) draw(formatStatusLine(shown, width()));
    },
    status(text) {
      if (!live) {
        stream.write(`${new Date().toISOString()} ${text}\n`);
        return;
      }
      const fitted = text.length > width() ? `${text.slice(0, width() - 1)}…` : text;
      draw(fitted);
    },
    finish() {
      if (live && lineOpen) stream.write("\n");
      lineOpen = false;
      finished = true;
    },
  };
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd()).join("\n");
}

const UNPROVISIONED_STATES: ReadonlyArray<[RunSummary["unprovisioned"][number]["state"], string]> = [
  ["parked", "parked in the DLQ"],
  ["retrying", "retrying"],
  ["claimed", "claimed"],
  ["queued", "queued"],
  ["in progress", "in progress"],
  ["never contacted", "never contacted"],
];

/** The outcome in one line whose counts add up to the fleet: provisioned, then each state of the rest. */
function verdict(summary: RunSummary): string {
  if (summary.provisioned === summary.total) return `all ${summary.total} nodes provisioned`;
  const states = UNPROVISIONED_STATES.flatMap(([state, words]) => {
    const count = summary.unprovisioned.filter((node) => node.state === state).length;
    return count > 0 ? [`${count} ${words}`] : [];
  });
  return `${summary.provisioned} of ${summary.total} nodes provisioned, ${summary.unprovisioned.length} not: ${states.join(", ")}`;
}

/** Over the hosts' own time (first request to last restart), so a start or a failover's wait after them does not dilute it. */
function rate(summary: RunSummary): string {
  const ms = summary.provisioningMs;
  if (ms === undefined) return "-";
  const perMinute = ms > 0 ? ((summary.provisioned / ms) * 60_000).toFixed(0) : "-";
  return `${perMinute} (${summary.provisioned} hosts in ${seconds(ms)}, first request to last restart)`;
}

/** The end-of-run summary: outcome, lease history, failover, invocations and every unprovisioned node. */
export function formatSummary(summary: RunSummary, extra: Array<[string, string]> = []): string {
  const lines: string[] = [];
  lines.push("", "Summary", "-------");
  lines.push(
    table([
      ["outcome", summary.outcome],
      ["result", verdict(summary)],
      ...(summary.lost.length > 0 && summary.provisioned < summary.total
        ? [["no dead letter", `${summary.lost.length} of the ${summary.unprovisioned.length} not provisioned (nothing in a DLQ says why)`] as [string, string]]
        : []),
      ["elapsed", seconds(summary.elapsedMs)],
      ["hosts/minute", rate(summary)],
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

/**
 * One summary line whose counts add up to what the nodes published: "100 published: 100 reached the
 * leader (primary 100, standby 0), none lost", or where the others are, those forwarded to a
 * lifecycle queue and not handled when the run ended included.
 */
export function formatLifecycleEvents(count: LifecycleEventCount): string {
  const perDeployment = Object.entries(count.reachedLeader)
    .map(([id, reached]) => `${id} ${reached}`)
    .join(", ");
  const reached = Object.values(count.reachedLeader).reduce((sum, value) => sum + value, 0);
  const elsewhere = count.droppedPaused + count.deadLettered + count.pendingInStream;
  const parts = [
    `${reached} reached the leader (${perDeployment})`,
    count.droppedPaused > 0 ? `${count.droppedPaused} dropped by a paused deployment` : "",
    count.deadLettered > 0 ? `${count.deadLettered} dead-lettered` : "",
    count.pendingInStream > 0 ? `${count.pendingInStream} still in the stream` : "",
    count.published > reached + elsewhere ? `${count.published - reached - elsewhere} forwarded, not handled yet` : "",
    // A redelivered event is handled twice: more reached than were published.
    reached > count.published ? `${reached - count.published} of them twice` : "",
    count.noneLost ? "none lost" : "",
  ].filter(Boolean);
  return `${count.published} published: ${parts.join(", ")}`;
}
