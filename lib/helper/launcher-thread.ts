/**
 * Starts helper processes from a worker thread instead of the main thread.
 *
 * libuv starts a child with fork() + exec() and blocks the calling thread until the child has
 * exec'd (on Linux it has no posix_spawn path). The wait is a few milliseconds for the provision
 * function's 150-250 MB process, more when the child has to wait for a CPU. On the main thread
 * that stalls every other host of the container for the time: bench:peer's profile had 13-16 % of
 * the main thread's samples in `spawn`. A worker thread has its own event loop, so only that
 * thread waits. It is one thread per process, started on the first run. It is a thread, not a
 * launcher process: the helper inherits the provisioner's own environment, limits and file
 * descriptors exactly as before, and no second program has to be shipped.
 *
 * The thread does what ExecHelperRunner did in place: stdin written and closed, stdout collected
 * up to a limit, stderr's tail kept, the child leading its own process group, and the whole group
 * killed with SIGKILL on timeout or too much output. Only the outcome comes back.
 */
import { Worker } from "node:worker_threads";
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
}

/** Why the child could not be started (spawn's own error), as the thread saw it. */
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
 * The thread's program. It is source text because the thread is started from it (`eval`): the
 * functions are bundled into one file per handler, so there is no second file to point a worker at,
 * and a stringified TypeScript function would carry the transpiler's helpers (`__name`) with it.
 * It only uses Node's built-in modules.
 */
export const LAUNCHER_THREAD_SOURCE = String.raw`
const { parentPort } = require("node:worker_threads");
const { spawn } = require("node:child_process");

const envs = new Map();

parentPort.on("message", (request) => {
  if (request.env) {
    envs.set(request.envId, request.env);
    return;
  }
  const { id, file, args, envId, input, timeoutMs, maxOutputBytes, stderrKeptBytes } = request;
  // spawn reports a start failure as an "error" event, and "close" may follow it: one answer per run.
  let answered = false;
  const answer = (reply) => {
    if (answered) return;
    answered = true;
    parentPort.postMessage({ id, ...reply });
  };
  const startError = (error) => ({ startError: { code: error.code || error.message, message: error.message } });
  let child;
  try {
    child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"], detached: true, env: envs.get(envId) });
  } catch (error) {
    answer(startError(error));
    return;
  }
  const chunks = [];
  let size = 0;
  let stderrTail = Buffer.alloc(0);
  let failure;
  const killGroup = (reason) => {
    if (failure === undefined) failure = reason;
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // The group is already gone.
    }
  };
  const timer = setTimeout(() => killGroup("timeout"), timeoutMs);
  child.on("error", (error) => {
    clearTimeout(timer);
    answer(startError(error));
  });
  child.stdout.on("data", (chunk) => {
    size += chunk.byteLength;
    if (size > maxOutputBytes) {
      killGroup("too-large");
      return;
    }
    chunks.push(chunk);
  });
  child.stderr.on("data", (chunk) => {
    stderrTail = Buffer.concat([stderrTail, chunk]).subarray(-stderrKeptBytes);
  });
  child.on("close", (exitCode, signal) => {
    clearTimeout(timer);
    const stdout = new Uint8Array(Buffer.concat(chunks));
    answer({ outcome: { stdout, stderrTail: stderrTail.toString("utf8").trim(), exitCode, signal, failure } });
  });
  // A helper that ignores stdin closes the pipe early; like Go, that is not an error by itself.
  child.stdin.on("error", () => {});
  child.stdin.end(input);
});
`;

interface Pending {
  resolve(outcome: LaunchOutcome): void;
  reject(error: Error): void;
}

/**
 * Runs helpers on one thread at a time, started on the first run and again after one died. The
 * process has one (below), shared by every ExecHelperRunner; tests make their own around a program
 * that dies on demand.
 */
export class LauncherThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  /** Environments by id, sent to each new thread once (a run names its environment by id). */
  private readonly envs = new Map<number, Record<string, string | undefined>>();
  private nextId = 1;

  constructor(private readonly source: string = LAUNCHER_THREAD_SOURCE) {}

  /** Registers a helper's environment; runs then name it by the returned id instead of carrying it. */
  environment(env: Record<string, string | undefined>): number {
    const envId = this.envs.size + 1;
    this.envs.set(envId, env);
    this.worker?.postMessage({ envId, env });
    return envId;
  }

  launch(request: LaunchRequest): Promise<LaunchOutcome> {
    const worker = this.started();
    const id = this.nextId++;
    return new Promise<LaunchOutcome>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Only a thread with runs in flight keeps the process alive.
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ id, ...request });
    });
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.source, { eval: true, stdout: false, stderr: false });
    worker.unref();
    worker.on("message", (reply: Reply) => this.settle(reply));
    // "error" is followed by "exit": only the first ends this thread's runs, and by the second a
    // new thread may already hold runs of its own.
    const fail = (why: string, cause?: unknown) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      const error = new HelperError(`the helper launcher thread ${why}; the run's outcome is unknown`, cause === undefined ? undefined : { cause });
      for (const { reject } of this.pending.values()) reject(error);
      this.pending.clear();
    };
    worker.on("error", (error) => fail("failed", error));
    worker.on("exit", (code) => fail(`exited with code ${code}`));
    for (const [envId, env] of this.envs) worker.postMessage({ envId, env });
    this.worker = worker;
    return worker;
  }

  private settle(reply: Reply): void {
    const waiting = this.pending.get(reply.id);
    if (!waiting) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker?.unref();
    if ("startError" in reply) {
      waiting.reject(new HelperStartError(reply.startError.code, reply.startError.message));
      return;
    }
    const { stdout, ...rest } = reply.outcome;
    waiting.resolve({ ...rest, stdout: Buffer.from(stdout.buffer, stdout.byteOffset, stdout.byteLength) });
  }
}

const launcher = new LauncherThread();

/** A helper's environment, registered with the launcher thread once: the id its runs name it by. */
export function helperEnvironment(env: Record<string, string | undefined>): number {
  return launcher.environment(env);
}

/** Runs one helper process to its end on the launcher thread. Rejects with HelperStartError when it could not start. */
export function launchHelper(request: LaunchRequest): Promise<LaunchOutcome> {
  return launcher.launch(request);
}
