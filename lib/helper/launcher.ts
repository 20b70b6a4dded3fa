/**
 * Starts helper processes from a small launcher process instead of the provisioner's own.
 *
 * libuv starts a child with fork() + exec() (on Linux it has no posix_spawn path), so every start
 * copies the page tables of the process that forks and tears the copy down again at the exec, and
 * the forking thread waits for that. For the provision function's 150-280 MB process that is
 * about 10 ms of CPU per start beside the helper's own work (a 277 MB Node process: 6.4 ms in the
 * parent and 27.5 ms in a `jq -n 1` child, against 1.7 ms and 21.5 ms from a 56 MB one), where Go
 * uses clone(CLONE_VFORK) and copies nothing. The launcher is a bare Node process (about 45 MB
 * resident) started from the same binary with its program as `-e` text (launcher-program.ts), so
 * nothing else is shipped; it is one per container, started on the first run and again after one died. The helper still gets
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
import { LAUNCHER_SOURCE, type LauncherMessage, type LauncherReply, type LauncherRequest, type LaunchRequest, type WireOutcome } from "./launcher-program";

export interface LaunchOutcome extends Omit<WireOutcome, "stdout"> {
  stdout: Buffer;
}

/** Why the child could not be started (spawn's own error), as the launcher saw it. */
export class HelperStartError extends HelperError {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Pending {
  resolve(outcome: LaunchOutcome): void;
  reject(error: Error): void;
}

/**
 * Runs helpers through one launcher process at a time, started on the first run and again after
 * one died. The provisioner has one, shared by every ExecHelperRunner (exec-runner.ts); tests make
 * their own around a program that dies on demand.
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
    this.child?.send({ envId, env } satisfies LauncherRequest);
    return envId;
  }

  launch(request: LaunchRequest): Promise<LaunchOutcome> {
    const child = this.started();
    const id = this.nextId++;
    return new Promise<LaunchOutcome>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Only a launcher with runs in flight keeps the provisioner's event loop alive.
      if (this.pending.size === 1) keepAlive(child, true);
      child.send({ id, ...request } satisfies LauncherRequest);
    });
  }

  private started(): ChildProcess {
    if (this.child) return this.child;
    // Its own environment is empty: each run carries the helper's, by id. Structured-clone
    // serialization carries stdin and stdout as bytes.
    const child = spawn(process.execPath, ["-e", this.source], { stdio: ["ignore", "ignore", "ignore", "ipc"], serialization: "advanced", env: {} });
    keepAlive(child, false);
    let crashed: string | undefined;
    child.on("message", (message: LauncherMessage) => {
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
    for (const [envId, env] of this.envs) child.send({ envId, env } satisfies LauncherRequest);
    this.child = child;
    return child;
  }

  private settle(reply: LauncherReply): void {
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
