/**
 * Stopping the local runs: one Ctrl-C (SIGINT to the whole foreground process group, as a terminal
 * sends it) or a SIGTERM to the npm process stops everything the run started (node, nats-server,
 * the DynamoDB Local JVM), prints the summary, and leaves neither process nor work dir with key files.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { processOutput } from "../support/process-output";

const ROOT = resolve(import.meta.dirname, "../..");

/** Every live descendant of `root` with its command name, from /proc. */
function descendants(root: number): Map<number, string> {
  const children = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const [state, ppid] = stat.slice(close + 2).split(" ");
      if (state === "Z") continue;
      names.set(Number(entry), stat.slice(stat.indexOf("(") + 1, close));
      children.set(Number(ppid), [...(children.get(Number(ppid)) ?? []), Number(entry)]);
    } catch {
      // Exited while reading.
    }
  }
  const found = new Map<number, string>();
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      found.set(child, names.get(child) ?? "?");
      walk(child);
    }
  };
  walk(root);
  return found;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

const output = (child: ChildProcess) => processOutput(child);

/** The exit code, or 128 + signal number when the process was killed by a signal (npm re-raises SIGINT on itself). */
const exited = (child: ChildProcess) =>
  new Promise<number>((resolveExit) => {
    const settle = () => resolveExit(child.exitCode ?? 128 + (child.signalCode === "SIGINT" ? 2 : child.signalCode === "SIGTERM" ? 15 : 0));
    if (child.exitCode !== null || child.signalCode !== null) settle();
    else child.once("exit", settle);
  });

/** Resolves once every process writing to the child's stdout or stderr (the run itself, whatever it passed them to) has exited. */
const closed = (child: ChildProcess) =>
  new Promise<void>((resolveClose) => {
    if (child.stdout?.closed && child.stderr?.closed) resolveClose();
    else child.once("close", () => resolveClose());
  });

/** Waits (bounded) for processes that should already be gone or going, e.g. servers a stopping parent has signalled. */
async function gone(pids: Iterable<number>): Promise<number[]> {
  const list = [...pids];
  for (let round = 0; round < 200 && list.some(alive); round++) await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  return list.filter(alive);
}

function startLocalRun(): ChildProcess {
  return spawn("npm", ["run", "local", "--", "--nodes", "3", "--fast", "--plain", "--helper", "inline", "--timeout", "600"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_update_notifier: "false" },
  });
}

function startLocalServices(): ChildProcess {
  return spawn("npm", ["run", "local:services", "--", "--fleet", "2"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_update_notifier: "false" },
  });
}

async function whenUp(child: ChildProcess, io: ReturnType<typeof output>) {
  const [, workDir] = await io.waitFor(/work dir (\S+);/);
  // The fleet and the handlers are running once the first progress line is out.
  await io.waitFor(/provisioned\s+\d+\/3/);
  const started = descendants(child.pid as number);
  return { workDir: workDir as string, started };
}

describe("signals", () => {
  it("one Ctrl-C stops npm run local: summary printed, no process and no key file left", async () => {
    const child = startLocalRun();
    const io = output(child);
    const { workDir, started } = await whenUp(child, io);
    const keyFile = join(workDir, "server-jwt-signing.seed");
    const keyExisted = existsSync(keyFile);

    process.kill(-(child.pid as number), "SIGINT");
    const code = await exited(child);
    const left = await gone(started.keys());

    expect([...started.values()]).toEqual(expect.arrayContaining(["node", "nats-server", "java"]));
    expect(keyExisted).toBe(true);
    expect(io.text()).toContain("interrupted: stopping everything");
    expect(io.text()).not.toContain("forcing the exit");
    expect(io.text()).toMatch(/outcome\s+interrupted/);
    expect(code).toBe(130);
    expect(left.map((pid) => started.get(pid))).toEqual([]);
    expect(existsSync(workDir)).toBe(false);
  }, 240_000);

  it("the copy of a Ctrl-C that npm relays late is the same Ctrl-C, not a second one that forces the exit", async () => {
    const child = startLocalRun();
    const io = output(child);
    const { workDir, started } = await whenUp(child, io);
    const [run] = [...started].filter(([, name]) => name === "node").map(([pid]) => pid);

    // The terminal's copy reaches the run at once; npm's relayed copy comes later when npm waits for
    // the CPU. 1.5 s is past the one-second window the scripts used to tell the two apart by. The run
    // is held (SIGSTOP) meanwhile: its stop takes well under 1.5 s, and the copy must find it stopping.
    process.kill(run as number, "SIGINT");
    await io.waitFor(/interrupted: stopping everything/);
    process.kill(run as number, "SIGSTOP");
    await new Promise((resolveWait) => setTimeout(resolveWait, 1_500));
    const stillStopping = alive(run as number);
    process.kill(child.pid as number, "SIGINT");
    // npm relays the copy to the held run, where it waits until the run goes on.
    await new Promise((resolveWait) => setTimeout(resolveWait, 500));
    process.kill(run as number, "SIGCONT");
    const code = await exited(child);
    await closed(child);
    const left = await gone(started.keys());

    expect(stillStopping).toBe(true);
    expect(io.text(), io.text()).not.toContain("forcing the exit");
    expect(io.text()).toMatch(/outcome\s+interrupted/);
    expect(code).toBe(130);
    expect(left.map((pid) => started.get(pid))).toEqual([]);
    expect(existsSync(workDir)).toBe(false);
  }, 240_000);

  it("SIGTERM to the npm process stops every child and removes the work dir", async () => {
    const child = startLocalRun();
    const io = output(child);
    const { workDir, started } = await whenUp(child, io);
    const runs = [...started].filter(([, name]) => name === "node").map(([pid]) => pid);

    process.kill(child.pid as number, "SIGTERM");
    await exited(child);
    // npm returns only once the run has stopped (npm forwards the SIGTERM to it and waits), not while
    // it is still stopping on its own in the background.
    const runningWhenNpmExited = runs.filter(alive);
    await closed(child);
    const left = await gone(started.keys());

    expect([...started.values()]).toEqual(expect.arrayContaining(["node", "nats-server", "java"]));
    expect(runningWhenNpmExited).toEqual([]);
    expect(left.map((pid) => started.get(pid))).toEqual([]);
    expect(existsSync(workDir)).toBe(false);
  }, 240_000);

  it("a Ctrl-C the moment scripts/local-services.ts says its servers are up is its orderly stop", async () => {
    const child = startLocalServices();
    const io = output(child);
    // No wait after the first line of the ready banner: the script must already be listening.
    await io.waitFor(/# local services for stage/);

    process.kill(-(child.pid as number), "SIGINT");
    const code = await exited(child);
    await closed(child);

    expect(io.text(), io.text()).toContain("# stopping local services");
    expect(io.text(), io.text()).toContain("# stopped");
    expect(code).toBe(130);
  }, 240_000);

  it("one Ctrl-C stops scripts/local-services.ts and its servers", async () => {
    const child = startLocalServices();
    const io = output(child);
    await io.waitFor(/# nodes: /);
    const started = descendants(child.pid as number);

    process.kill(-(child.pid as number), "SIGINT");
    const code = await exited(child);
    // npm's exit can be seen before the last lines its script wrote have been read: wait for the pipes.
    await closed(child);
    const left = await gone(started.keys());

    expect([...started.values()]).toEqual(expect.arrayContaining(["node", "nats-server", "java"]));
    expect(io.text(), io.text()).toContain("# stopping local services");
    expect(io.text(), io.text()).toContain("# stopped");
    expect(io.text()).not.toContain("# forced exit");
    // npm re-raises the SIGINT on itself once its script has exited.
    expect(code).toBe(130);
    expect(left.map((pid) => started.get(pid))).toEqual([]);
  }, 240_000);
});
