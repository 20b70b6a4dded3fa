/**
 * Starts helper processes from a small launcher process instead of the provisioner's own.
 *
 * libuv starts a child with fork() + exec() (on Linux it has no posix_spawn path), so every start
 * copies the page tables of the process that forks and tears the copy down again at the exec, and
 * the forking thread waits for that. For the provision function's 150-280 MB process that is
 * about 10 ms of CPU per start beside the helper's own work (a 277 MB Node process: 6.4 ms in the
 * parent and 27.5 ms in a `jq -n 1` child, against 1.7 ms and 21.5 ms from a 56 MB one), where Go
 * uses clone(CLONE_VFORK) and copies nothing. The launcher is a bare Node process (about 45 MB
 * resident) started from the same binary with its program as `-e` text, so nothing else is
 * shipped; it is one per container, started on the first run and again after one died. The helper still gets
 * the provisioner's environment (each run names one registered here), its working directory and
 * limits (the launcher inherits them), and no other descriptor than its three pipes.
 *
 * The launcher does what ExecHelperRunner did in place: stdin written and closed, stdout collected
 * up to a limit, stderr's tail kept, the child leading its own process group, and the whole group
 * killed with SIGKILL on timeout or too much output. A process the helper started may leave the
 * group (setsid) and keep stdout or stderr open; the launcher does not wait for such pipes past a
 * short grace after the helper's exit or kill: it kills whatever still holds them and stops
 * reading. Only the outcome comes back, over the IPC channel. When the channel goes (the
 * provisioner died), the launcher kills its helpers' groups and exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { HelperError } from "../errors";

export interface LaunchRequest {
  file: string;
  args: string[];
  /** From helperEnvironment. */
  envId: number;
  input: Uint8Array;
  timeoutMs: number;
  maxOutputBytes: number;
  stderrKeptBytes: number;
}

export interface LaunchOutcome {
  stdout: Buffer;
  stderrTail: string;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  failure?: "timeout" | "too-large";
  /**
   * The pipes were still open PIPE_GRACE_MS after the helper exited or was killed: something it
   * started held them, was killed, and what was read by then is all there is.
   */
  outputHeldOpen?: true;
}

/**
 * How long a run waits for its helper's stdout and stderr to reach EOF after the helper exited or
 * was killed. A pipe normally closes with its last writer at once; this only bounds the wait for a
 * process the helper left behind, so a run lasts at most helper_timeout plus this.
 */
const PIPE_GRACE_MS = 500;

/** Why the child could not be started (spawn's own error), as the launcher saw it. */
export class HelperStartError extends HelperError {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Reply = { id: number; outcome: Omit<LaunchOutcome, "stdout"> & { stdout: Uint8Array } } | { id: number; startError: { code: string; message: string } };

/**
 * The launcher's program. It is source text because the launcher is started from it (`node -e`):
 * the functions are bundled into one file per handler, so there is no second file to point Node at,
 * and a stringified TypeScript function would carry the transpiler's helpers (`__name`) with it.
 * It only uses Node's built-in modules.
 */
export const LAUNCHER_SOURCE = String.raw`
const { spawn } = require("node:child_process");
const fs = require("node:fs");

// How long a run's pipes may stay open once its helper has exited or been killed. A process the
// helper started can hold stdout or stderr open for as long as it lives; past this the run ends
// without waiting for their EOF, so helper_timeout bounds the whole run.
const PIPE_GRACE_MS = ${PIPE_GRACE_MS};

const envs = new Map();
const groups = new Set();

const killGroup = (pid) => {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // The group is already gone.
  }
};

// The helper's ends of its stdout and stderr as /proc names them ("socket:[inode]": libuv's stdio
// pipes are socket pairs, whose two ends have different inodes, so they are read from the helper,
// just after spawn returned at its exec). None off Linux, where the group kill is all there is.
const outputNames = (pid) => {
  const names = [];
  for (const fd of [1, 2]) {
    try {
      const name = fs.readlinkSync("/proc/" + pid + "/fd/" + fd);
      // Only the socket it was given: never a file everything holds, should it have redirected already.
      if (name.startsWith("socket:[")) names.push(name);
    } catch {
      // No /proc, or the helper is gone already.
    }
  }
  return names;
};

// A process the helper started that left its group (setsid, a daemon's double fork, Node's
// detached spawn) is out of the group kill's reach; if it still holds the helper's stdout or
// stderr, it inherited them from the helper, and it is what keeps the run's pipes open.
const killPipeHolders = (names) => {
  if (names.length === 0) return;
  let pids;
  try {
    pids = fs.readdirSync("/proc").filter((name) => /^[0-9]+$/.test(name) && Number(name) !== process.pid);
  } catch {
    return;
  }
  for (const pid of pids) {
    let fds;
    try {
      fds = fs.readdirSync("/proc/" + pid + "/fd");
    } catch {
      continue; // Gone, or not ours to read.
    }
    const holds = fds.some((fd) => {
      try {
        return names.includes(fs.readlinkSync("/proc/" + pid + "/fd/" + fd));
      } catch {
        return false;
      }
    });
    if (holds) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
};

// The provisioner is gone: nobody is waiting for these helpers, and nobody would time them out.
process.on("disconnect", () => {
  for (const pid of groups) killGroup(pid);
  process.exit(0);
});

// The provisioner learns why its launcher died before it sees the exit.
process.on("uncaughtException", (error) => {
  const crash = { crashed: String((error && error.message) || error) };
  try {
    process.send(crash, () => process.exit(70));
  } catch {
    process.exit(70);
  }
});

// stdout up to its limit (tooLarge is called past it), and stderr's last stderrKeptBytes.
const collectOutput = (child, maxOutputBytes, stderrKeptBytes, tooLarge) => {
  const chunks = [];
  let size = 0;
  let stderrTail = Buffer.alloc(0);
  child.stdout.on("data", (chunk) => {
    size += chunk.byteLength;
    if (size > maxOutputBytes) {
      tooLarge();
      return;
    }
    chunks.push(chunk);
  });
  child.stderr.on("data", (chunk) => {
    stderrTail = Buffer.concat([stderrTail, chunk]).subarray(-stderrKeptBytes);
  });
  return { read: () => ({ stdout: new Uint8Array(Buffer.concat(chunks)), stderrTail: stderrTail.toString("utf8").trim() }) };
};

const startError = (error) => ({ startError: { code: error.code || error.message, message: error.message } });

const run = (request) => {
  const { id, file, args, envId, input, timeoutMs, maxOutputBytes, stderrKeptBytes } = request;
  // spawn reports a start failure as an "error" event, and "close" may follow it: one answer per run.
  let answered = false;
  const answer = (reply) => {
    if (answered) return;
    answered = true;
    process.send({ id, ...reply });
  };
  let child;
  try {
    child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"], detached: true, env: envs.get(envId) });
  } catch (error) {
    answer(startError(error));
    return;
  }
  const pid = child.pid;
  if (pid !== undefined) groups.add(pid);
  const pipes = pid === undefined ? [] : outputNames(pid);
  const output = collectOutput(child, maxOutputBytes, stderrKeptBytes, () => stop("too-large"));
  let failure;
  let exited = { code: null, signal: null };
  let outputHeldOpen;
  let grace;
  let timer;
  const end = (reply) => {
    clearTimeout(timer);
    clearTimeout(grace);
    groups.delete(pid);
    answer(reply);
  };
  const finish = () => {
    const { stdout, stderrTail } = output.read();
    end({ outcome: { stdout, stderrTail, exitCode: exited.code, signal: exited.signal, failure, outputHeldOpen } });
  };
  const killAll = () => {
    if (pid === undefined) return;
    killGroup(pid);
    killPipeHolders(pipes);
  };
  // Once the helper has exited or been killed, its pipes get PIPE_GRACE_MS to reach EOF; then
  // whatever holds them is killed and the launcher stops reading them.
  const closeAfterGrace = () => {
    if (grace !== undefined || answered) return;
    grace = setTimeout(() => {
      outputHeldOpen = true;
      killAll();
      for (const stream of [child.stdin, child.stdout, child.stderr]) stream.destroy();
      finish();
    }, PIPE_GRACE_MS);
  };
  const stop = (reason) => {
    if (failure !== undefined) return;
    failure = reason;
    killAll();
    closeAfterGrace();
  };
  timer = setTimeout(() => stop("timeout"), timeoutMs);
  child.on("error", (error) => end(startError(error)));
  // The helper's own exit ends its timeout: what remains is reading what it wrote.
  child.on("exit", (code, signal) => {
    exited = { code, signal };
    clearTimeout(timer);
    closeAfterGrace();
  });
  child.on("close", finish);
  // A helper that ignores stdin closes the pipe early; like Go, that is not an error by itself.
  child.stdin.on("error", () => {});
  child.stdin.end(input);
};

process.on("message", (request) => {
  if (request.env) {
    envs.set(request.envId, request.env);
    return;
  }
  run(request);
});
`;

type Message = Reply | { crashed: string };

interface Pending {
  resolve(outcome: LaunchOutcome): void;
  reject(error: Error): void;
}

/**
 * Runs helpers through one launcher process at a time, started on the first run and again after
 * one died. The provisioner has one (below), shared by every ExecHelperRunner; tests make their
 * own around a program that dies on demand.
 */
export class HelperLauncher {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  /** Environments by id, sent to each new launcher once (a run names its environment by id). */
  private readonly envs = new Map<number, Record<string, string | undefined>>();
  private nextId = 1;

  constructor(private readonly source: string = LAUNCHER_SOURCE) {}

  /** Registers a helper's environment; runs then name it by the returned id instead of carrying it. */
  environment(env: Record<string, string | undefined>): number {
    const envId = this.envs.size + 1;
    this.envs.set(envId, env);
    this.child?.send({ envId, env });
    return envId;
  }

  launch(request: LaunchRequest): Promise<LaunchOutcome> {
    const child = this.started();
    const id = this.nextId++;
    return new Promise<LaunchOutcome>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Only a launcher with runs in flight keeps the provisioner's event loop alive.
      if (this.pending.size === 1) keepAlive(child, true);
      child.send({ id, ...request });
    });
  }

  private started(): ChildProcess {
    if (this.child) return this.child;
    // Its own environment is empty: each run carries the helper's, by id. Structured-clone
    // serialization carries stdin and stdout as bytes.
    const child = spawn(process.execPath, ["-e", this.source], { stdio: ["ignore", "ignore", "ignore", "ipc"], serialization: "advanced", env: {} });
    keepAlive(child, false);
    let crashed: string | undefined;
    child.on("message", (message: Message) => {
      if ("crashed" in message) crashed = message.crashed;
      else this.settle(message);
    });
    // A launcher that could not start gives "error" and then maybe "exit": only the first ends its
    // runs, and by the second a new launcher may already hold runs of its own.
    const fail = (why: string, cause?: unknown) => {
      if (this.child !== child) return;
      this.child = undefined;
      const error = new HelperError(`the helper launcher ${why}; the run's outcome is unknown`, cause === undefined ? undefined : { cause });
      for (const { reject } of this.pending.values()) reject(error);
      this.pending.clear();
    };
    child.on("error", (error) => fail("failed", error));
    child.on("exit", (code, signal) => fail(signal ? `was killed by ${signal}` : `exited with code ${code}`, crashed === undefined ? undefined : new Error(crashed)));
    for (const [envId, env] of this.envs) child.send({ envId, env });
    this.child = child;
    return child;
  }

  private settle(reply: Reply): void {
    const waiting = this.pending.get(reply.id);
    if (!waiting) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0 && this.child) keepAlive(this.child, false);
    if ("startError" in reply) {
      waiting.reject(new HelperStartError(reply.startError.code, reply.startError.message));
      return;
    }
    const { stdout, ...rest } = reply.outcome;
    waiting.resolve({ ...rest, stdout: Buffer.from(stdout.buffer, stdout.byteOffset, stdout.byteLength) });
  }
}

/** Whether the launcher (the process and its IPC channel) keeps the provisioner's event loop alive. */
function keepAlive(child: ChildProcess, alive: boolean): void {
  if (alive) {
    child.ref();
    child.channel?.ref();
  } else {
    child.unref();
    child.channel?.unref();
  }
}

const launcher = new HelperLauncher();

/** A helper's environment, registered with the launcher once: the id its runs name it by. */
export function helperEnvironment(env: Record<string, string | undefined>): number {
  return launcher.environment(env);
}

/** Runs one helper process to its end through the launcher. Rejects with HelperStartError when it could not start. */
export function launchHelper(request: LaunchRequest): Promise<LaunchOutcome> {
  return launcher.launch(request);
}
