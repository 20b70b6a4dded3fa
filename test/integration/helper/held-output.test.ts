/**
 * helper_timeout bounds the whole helper run, including a process the helper started in a new
 * session (Node's `detached`, setsid, a daemon's double fork) that keeps its stdout and stderr open:
 * out of reach of the helper's process-group kill, it used to hold the run until it exited on its
 * own (a 10 s timeout reported after 60.2 s). Observed where it lands: the run's wall time, its
 * answer, and the processes left on the machine (/proc).
 */
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import type { HelperRequest } from "../../../lib/ports/helper";

/** How long the detached child holds the helper's output: what the run used to wait for. */
const CHILD_HOLDS_S = 20;
/**
 * What a run may take beyond its timeout (or beyond the helper's exit): the launcher's grace of
 * 0.5 s for the pipes, and slack for a busy machine. Far below CHILD_HOLDS_S.
 */
const SLACK_MS = 3_000;

const REQUEST: HelperRequest = { identity: "n1.example.net", csr: null, ed25519_pubkey: null, inventory: "{}", jwt: null };

interface Started {
  helper: number;
  child: number;
}

let dir: string;
const started: Started[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "held-output-"));
});

afterAll(async () => {
  // Whatever a failed run left behind.
  for (const { helper, child } of started) for (const pid of [-helper, child]) killQuietly(pid);
  await rm(dir, { recursive: true, force: true });
});

/**
 * A Node helper that starts `sleep` in a session of its own with the helper's stdout and stderr,
 * records both pids, then does `then` (JavaScript run in the helper).
 */
async function detachingHelper(name: string, then: string): Promise<{ command: string; pids: () => Promise<Started> }> {
  const path = join(dir, `${name}.mjs`);
  const pidFile = join(dir, `${name}.pids`);
  await writeFile(
    path,
    [
      `#!${process.execPath}`,
      `import { spawn } from "node:child_process";`,
      `import { writeFileSync } from "node:fs";`,
      `const child = spawn("sleep", ["${CHILD_HOLDS_S}"], { detached: true, stdio: ["ignore", "inherit", "inherit"] });`,
      `child.unref();`,
      `writeFileSync(${JSON.stringify(pidFile)}, JSON.stringify({ helper: process.pid, child: child.pid }));`,
      then,
    ].join("\n"),
  );
  await chmod(path, 0o755);
  const pids = async () => {
    const recorded = JSON.parse(await readFile(pidFile, "utf8")) as Started;
    started.push(recorded);
    return recorded;
  };
  return { command: `'${path}'`, pids };
}

/** Processes still running (not gone, not a zombie) in any of these process groups, from /proc. */
async function liveMembers(groups: readonly number[]): Promise<string[]> {
  const live: string[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
    // pid (comm) state ppid pgrp ...: the fields after the command name, which may hold spaces.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (state !== undefined && state !== "Z" && groups.includes(Number(pgrp))) live.push(`${name} (${stat.slice(0, stat.lastIndexOf(")") + 1)})`);
  }
  return live;
}

async function timed<T>(work: Promise<T>): Promise<{ result: T | undefined; error: unknown; ms: number }> {
  const start = performance.now();
  try {
    const result = await work;
    return { result, error: undefined, ms: performance.now() - start };
  } catch (error) {
    return { result: undefined, error, ms: performance.now() - start };
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Gone already.
  }
}

describe("a helper whose detached child keeps its output open", () => {
  it("times out within helper_timeout plus a short grace, and leaves no process of the helper's or its child's group", async () => {
    // Arrange: the helper never answers; its child, in a session of its own, holds stdout for 20 s.
    const timeoutMs = 2_000;
    const { command, pids } = await detachingHelper("never-answers", "setTimeout(() => {}, 60_000);");
    const runner = new ExecHelperRunner({ command, timeoutMs });

    // Act
    const run = await timed(runner.run(REQUEST));

    // Assert
    expect(run.error).toBeInstanceOf(HelperError);
    expect((run.error as HelperError).message).toMatch(/never-answers\.mjs timed out after 2000 ms$/);
    expect(run.ms).toBeLessThan(timeoutMs + SLACK_MS);
    const { helper, child } = await pids();
    expect(child).not.toBe(helper);
    await expect.poll(() => liveMembers([helper, child]), { timeout: 1_000 }).toEqual([]);
  });

  it("uses the reply of a helper that answered and exited, without waiting for the child or the timeout", async () => {
    // Arrange
    const reply = JSON.stringify({ configuration: { identity: "n1.example.net" } });
    const { command, pids } = await detachingHelper("answers-and-exits", `process.stdout.write(${JSON.stringify(reply)}, () => process.exit(0));`);
    const runner = new ExecHelperRunner({ command, timeoutMs: 15_000 });

    // Act
    const run = await timed(runner.run(REQUEST));

    // Assert
    expect(run.error).toBeUndefined();
    expect(run.result?.configuration).toEqual({ identity: "n1.example.net" });
    expect(run.ms).toBeLessThan(SLACK_MS);
    const { helper, child } = await pids();
    await expect.poll(() => liveMembers([helper, child]), { timeout: 1_000 }).toEqual([]);
  });

  it("reports an incomplete reply as cut off by the process that held the output, soon after the helper's exit", async () => {
    // Arrange: half a reply, then exit 0, the child still holding stdout.
    const { command, pids } = await detachingHelper("half-answer", `process.stdout.write('{"configuration": {"identity"', () => process.exit(0));`);
    const runner = new ExecHelperRunner({ command, timeoutMs: 15_000 });

    // Act
    const run = await timed(runner.run(REQUEST));

    // Assert
    expect(run.error).toBeInstanceOf(HelperError);
    expect((run.error as HelperError).message).toMatch(
      /half-answer\.mjs: not valid JSON \(29 bytes\); a process it started held its output open after it exited, so what was read by then may be incomplete$/,
    );
    expect((run.error as HelperError).cause).toBeInstanceOf(HelperError);
    expect(run.ms).toBeLessThan(SLACK_MS);
    const { helper, child } = await pids();
    await expect.poll(() => liveMembers([helper, child]), { timeout: 1_000 }).toEqual([]);
  });
});
