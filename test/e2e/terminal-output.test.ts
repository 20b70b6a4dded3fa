/**
 * What a person sees in a terminal: `npm run local` driven in a pseudo-terminal (util-linux
 * `script`), so the progress line is the live, rewritten one. Every invocation's Powertools EMF
 * flush would print a JSON document on stdout, through that line; nothing but our own text may
 * appear, during the run, after it with --keep-running (the export block), and after Ctrl-C. At 80
 * and 160 columns the live line must fit (a wrapped line leaves its first row behind at the next
 * rewrite), end before the summary, and its counts, like the summary's, must add up to the fleet.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { processOutput } from "../support/process-output";
import { renderTerminal } from "../support/terminal-screen";

const ROOT = resolve(import.meta.dirname, "../..");
const STATUS_ROW = /^\[\s*[\d.]+s\] /;
/** Refuses the odd-numbered nodes: the run settles with half the fleet provisioned and half parked. */
const HALF_FAILING_HELPER = join(ROOT, "test/e2e/fixtures/odd-nodes-fail-helper.mjs");
const NODES = 20;

/** `npm run local -- <args>` in a pseudo-terminal `columns` wide, to its end: its exit code and what the terminal received. */
async function runInTerminal(columns: number, args: string): Promise<{ code: number | null; output: string }> {
  // As below: `exec`, and SHELL pinned to /bin/sh, which runs the stty and the quoted helper command line.
  const child = spawn("script", ["-qfec", `stty cols ${columns} rows 40; exec npm run local -- ${args}`, "/dev/null"], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, npm_config_update_notifier: "false", SHELL: "/bin/sh" },
  });
  const io = processOutput(child, { stdoutOnly: true });
  const code = await new Promise<number | null>((resolveExit) => child.once("exit", resolveExit));
  return { code, output: io.text() };
}

/** The hosts a status line or the summary's result counts, bucket by bucket, and the fleet they should add up to. */
function countsOf(statusRow: string): { buckets: number[]; total: number } {
  const buckets = [...statusRow.matchAll(/(?:waiting|in progress|retrying|failed) +(\d+)/g)].map((match) => Number(match[1]));
  const [, provisioned, total] = /provisioned +(\d+)\/(\d+)/.exec(statusRow) ?? [];
  return { buckets: [...buckets, Number(provisioned)], total: Number(total) };
}

/** Resolves once `file` holds more than `count` lines containing `needle`. */
async function logGrows(file: string, needle: string, count: number): Promise<void> {
  const seen = () => readFileSync(file, "utf8").split("\n").filter((line) => line.includes(needle)).length;
  while (seen() <= count) await new Promise((resolveWait) => setTimeout(resolveWait, 200));
}

describe("npm run local in a terminal", () => {
  it("keeps the live line free of EMF JSON during the run, with --keep-running and after Ctrl-C", async () => {
    // script -e: its exit code is the command's; stdin is ours, so "\x03" is a real Ctrl-C on the pty.
    // script runs the command with $SHELL -c, in the terminal's foreground process group. `exec`: an
    // interactive shell keeps itself out of its job's group; bash -c would exec a lone command anyway,
    // but dash (/bin/sh, script's choice where SHELL is unset) stays and dies of the Ctrl-C itself,
    // and script then reports 130 while the run is still stopping. SHELL is pinned to that case.
    const child = spawn(
      "script",
      ["-qfec", "exec npm run local -- --fast --nodes 10 --helper inline --keep-running --timeout 300", "/dev/null"],
      { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, npm_config_update_notifier: "false", COLUMNS: "200", SHELL: "/bin/sh" } },
    );
    // The pseudo-terminal carries both of the run's streams on script's stdout.
    const io = processOutput(child, { stdoutOnly: true });
    const [, workDir, logPath] = await io.waitFor(/work dir (\S+); logs in (\S+)/);
    await io.waitFor(/stays up until Ctrl-C/);
    // The deployment's .env file is for `source`: the multi-line YAML comes back as written.
    const sourced = execFileSync("bash", ["-c", `set -e; source "$1"; printf %s "$PROVISIONER_CONFIG_YAML"`, "-", join(workDir as string, "primary.env")], {
      encoding: "utf8",
    });
    // A lease-keeper invocation that ends after the export block: its flush is one the old code printed.
    const finished = "lease keeper run finished";
    await logGrows(logPath as string, finished, readFileSync(logPath as string, "utf8").split(finished).length - 1);
    child.stdin?.write("\x03");
    const code = await new Promise<number | null>((resolveExit) => child.once("exit", resolveExit));
    const text = io.text();
    // Each rewrite of the live line starts with "\r"; every segment between them is one thing the user saw.
    const segments = text.split(/[\r\n]/).filter((segment) => segment.trim() !== "");

    expect(parseYaml(sourced)).toMatchObject({ site: "local", leader_election: true, deployment_id: "primary" });
    expect(text).toMatch(/all 10 nodes provisioned/);
    expect(text).toContain("interrupted: stopping everything");
    expect(segments.filter((segment) => segment.includes("[") && segment.includes("provisioned")).length).toBeGreaterThan(0);
    expect(segments.filter((segment) => /\{"|"_aws"/.test(segment))).toEqual([]);
    expect(code, text).toBe(0);
    // The orderly stop ran to its end: the work dir with the key files is gone.
    expect(existsSync(workDir as string)).toBe(false);
  }, 240_000);

  it("fits the live line to 80 and 160 columns, leaves nothing of it behind, and adds every count up to the fleet", async () => {
    const args = `--fast --nodes ${NODES} --helper 'node ${HALF_FAILING_HELPER}' --timeout 200`;
    const runs = await Promise.all([80, 160].map(async (columns) => ({ columns, ...(await runInTerminal(columns, args)) })));

    for (const { columns, code, output } of runs) {
      const frames = output
        .split(/[\r\n]/)
        .map((segment) => stripVTControlCharacters(segment))
        .filter((segment) => STATUS_ROW.test(segment));
      const screen = renderTerminal(output, columns);
      const summaryAt = screen.rows.indexOf("Summary");
      const statusRows = screen.rows.filter((row) => STATUS_ROW.test(row));
      const last = countsOf(statusRows.at(-1) ?? "");
      const [, provisioned, total, notProvisioned, states] = /result +(\d+) of (\d+) nodes provisioned, (\d+) not: (.*)/.exec(screen.rows.join("\n")) ?? [];
      const stateCounts = [...(states ?? "").matchAll(/(\d+) [a-z]/g)].map((match) => Number(match[1]));
      const context = `${columns} columns:\n${screen.rows.join("\n")}`;

      expect(frames.length, context).toBeGreaterThan(5);
      expect(frames.filter((frame) => frame.length > columns - 1), context).toEqual([]);
      expect(frames.filter((frame) => /waiting for:\s*$/.test(frame)), context).toEqual([]);
      // Nothing of a live line wrapped, one line left: the last, before the summary.
      expect(screen.wrapped.filter((row) => STATUS_ROW.test(row)), context).toEqual([]);
      expect(statusRows.length, context).toBe(1);
      expect(screen.rows.indexOf(statusRows[0] as string), context).toBeLessThan(summaryAt);
      expect(last.total, context).toBe(NODES);
      expect(last.buckets.reduce((sum, count) => sum + count, 0), context).toBe(NODES);
      expect(Number(total), context).toBe(NODES);
      expect(Number(provisioned) + Number(notProvisioned), context).toBe(NODES);
      expect(stateCounts.reduce((sum, count) => sum + count, 0), context).toBe(Number(notProvisioned));
      // The stop says what it stops while it does, then one line when it is done (no "stopping:" row left).
      expect(output).toContain(`stopping: the fleet (${NODES} nodes)`);
      expect(screen.rows.slice(summaryAt).filter((row) => row.includes("stopping:")), context).toEqual([]);
      expect(screen.rows.slice(summaryAt).join(""), context).toMatch(/stopped everything the run started in [\d.]+ s/);
      // Half the fleet parked: settled, not provisioned, so the exit code says so.
      expect(code, context).toBe(1);
    }
  }, 300_000);
});
