/**
 * The helper launcher's program (launcher.ts says why there is a launcher and what it does), and
 * the messages it exchanges with the provisioner over IPC.
 *
 * The launcher is started with its program as `node -e` text: the functions are bundled into one
 * file per handler, so there is no second file to point Node at. That text is LauncherProgram's
 * own source (Function.prototype.toString), so tsc and eslint check the program like any other
 * code. It must run alone, outside the module it was written in, so the class:
 * - uses nothing from its module or any import: Node's modules and the pipe grace come in through
 *   the constructor, and everything else is a global (process, Buffer, setTimeout);
 * - names itself with a static `name`, and binds no function to a name but its methods: esbuild's
 *   keepNames (the Lambda bundles, tsx) otherwise puts calls to a naming helper of the bundle into
 *   the class's text (`static{__name(this, ...)}`, `const f = __name(() => ..., "f")`). Callbacks
 *   are arrows passed straight to the call that takes them.
 * test/integration/helper/launcher.test.ts runs it from a bundle built as serverless.yml builds the
 * functions.
 */
import type { ChildProcessWithoutNullStreams, spawn as nodeSpawn } from "node:child_process";
import type * as nodeFs from "node:fs";

export interface LaunchRequest {
  file: string;
  args: string[];
  /** From HelperLauncher.environment. */
  envId: number;
  input: Uint8Array;
  timeoutMs: number;
  maxOutputBytes: number;
  stderrKeptBytes: number;
}

/** A run's outcome as the launcher sends it: structured-clone serialization carries stdout as bytes. */
export interface WireOutcome {
  stdout: Uint8Array;
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

interface StartError {
  startError: { code: string; message: string };
}

export type LauncherReply = { id: number; outcome: WireOutcome } | ({ id: number } & StartError);

/** What the launcher sends: a run's answer, or why it is about to die. */
export type LauncherMessage = LauncherReply | { crashed: string };

/** What the provisioner sends: a run, or a helper environment that runs name by id. */
export type LauncherRequest = ({ id: number } & LaunchRequest) | { envId: number; env: Record<string, string | undefined> };

/**
 * How long a run waits for its helper's stdout and stderr to reach EOF after the helper exited or
 * was killed. A pipe normally closes with its last writer at once; this only bounds the wait for a
 * process the helper left behind, so a run lasts at most helper_timeout plus this.
 */
const PIPE_GRACE_MS = 500;

interface LauncherModules {
  spawn: typeof nodeSpawn;
  fs: typeof nodeFs;
}

/** One helper run in the launcher, from its spawn to its one answer. */
interface Run {
  readonly id: number;
  readonly child: ChildProcessWithoutNullStreams;
  readonly pid: number | undefined;
  /** The helper's ends of its stdout and stderr (outputNames). */
  readonly pipes: string[];
  readonly stdout: Buffer[];
  stdoutBytes: number;
  /** stderr's last stderrKeptBytes. */
  stderrTail: Buffer;
  answered: boolean;
  failure: WireOutcome["failure"];
  exited: { code: number | null; signal: NodeJS.Signals | null };
  outputHeldOpen: true | undefined;
  grace: NodeJS.Timeout | undefined;
  timer: NodeJS.Timeout | undefined;
}

/** The launcher process: `new LauncherProgram(modules, pipeGraceMs).start()`, run by LAUNCHER_SOURCE. */
class LauncherProgram {
  static readonly name = "LauncherProgram";
  private readonly envs = new Map<number, Record<string, string | undefined>>();
  /** The process groups of the helpers running now. */
  private readonly groups = new Set<number>();

  constructor(
    private readonly modules: LauncherModules,
    // How long a run's pipes may stay open once its helper has exited or been killed. A process the
    // helper started can hold stdout or stderr open for as long as it lives; past this the run ends
    // without waiting for their EOF, so helper_timeout bounds the whole run.
    private readonly pipeGraceMs: number,
  ) {}

  start(): void {
    // The provisioner is gone: nobody is waiting for these helpers, and nobody would time them out.
    process.on("disconnect", () => {
      for (const pid of this.groups) this.killGroup(pid);
      process.exit(0);
    });
    // The provisioner learns why its launcher died before it sees the exit.
    process.on("uncaughtException", (error) => {
      const crash: LauncherMessage = { crashed: String((error && error.message) || error) };
      try {
        process.send!(crash, () => process.exit(70));
      } catch {
        process.exit(70);
      }
    });
    process.on("message", (message) => {
      const request = message as LauncherRequest;
      if ("env" in request) {
        this.envs.set(request.envId, request.env);
        return;
      }
      this.run(request);
    });
  }

  private killGroup(pid: number): void {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // The group is already gone.
    }
  }

  /**
   * The helper's ends of its stdout and stderr as /proc names them ("socket:[inode]": libuv's stdio
   * pipes are socket pairs, whose two ends have different inodes, so they are read from the helper,
   * just after spawn returned at its exec). None off Linux, where the group kill is all there is.
   */
  private outputNames(pid: number): string[] {
    const names: string[] = [];
    for (const fd of [1, 2]) {
      try {
        const name = this.modules.fs.readlinkSync("/proc/" + pid + "/fd/" + fd);
        // Only the socket it was given: never a file everything holds, should it have redirected already.
        if (name.startsWith("socket:[")) names.push(name);
      } catch {
        // No /proc, or the helper is gone already.
      }
    }
    return names;
  }

  /**
   * A process the helper started that left its group (setsid, a daemon's double fork, Node's
   * detached spawn) is out of the group kill's reach; if it still holds the helper's stdout or
   * stderr, it inherited them from the helper, and it is what keeps the run's pipes open.
   */
  private killPipeHolders(names: string[]): void {
    if (names.length === 0) return;
    const { fs } = this.modules;
    let pids: string[];
    try {
      pids = fs.readdirSync("/proc").filter((name) => /^[0-9]+$/.test(name) && Number(name) !== process.pid);
    } catch {
      return;
    }
    for (const pid of pids) {
      let fds: string[];
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
  }

  private startError(error: NodeJS.ErrnoException): StartError {
    return { startError: { code: error.code || error.message, message: error.message } };
  }

  private run(request: { id: number } & LaunchRequest): void {
    const { id, file, args, envId, input, timeoutMs, maxOutputBytes, stderrKeptBytes } = request;
    let child: ChildProcessWithoutNullStreams;
    try {
      child = this.modules.spawn(file, args, { stdio: ["pipe", "pipe", "pipe"], detached: true, env: this.envs.get(envId) });
    } catch (error) {
      this.send({ id, ...this.startError(error as NodeJS.ErrnoException) });
      return;
    }
    const pid = child.pid;
    if (pid !== undefined) this.groups.add(pid);
    const pipes = pid === undefined ? [] : this.outputNames(pid);
    const run: Run = { id, child, pid, pipes, stdout: [], stdoutBytes: 0, stderrTail: Buffer.alloc(0), answered: false, failure: undefined, exited: { code: null, signal: null }, outputHeldOpen: undefined, grace: undefined, timer: undefined };
    // stdout up to its limit, and stderr's last stderrKeptBytes.
    child.stdout.on("data", (chunk: Buffer) => {
      run.stdoutBytes += chunk.byteLength;
      if (run.stdoutBytes > maxOutputBytes) {
        this.stop(run, "too-large");
        return;
      }
      run.stdout.push(chunk);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      run.stderrTail = Buffer.concat([run.stderrTail, chunk]).subarray(-stderrKeptBytes);
    });
    run.timer = setTimeout(() => this.stop(run, "timeout"), timeoutMs);
    child.on("error", (error) => this.end(run, this.startError(error)));
    // The helper's own exit ends its timeout: what remains is reading what it wrote.
    child.on("exit", (code, signal) => {
      run.exited = { code, signal };
      clearTimeout(run.timer);
      this.closeAfterGrace(run);
    });
    child.on("close", () => this.finish(run));
    // A helper that ignores stdin closes the pipe early; like Go, that is not an error by itself.
    child.stdin.on("error", () => {});
    child.stdin.end(input);
  }

  private send(reply: LauncherReply): void {
    process.send!(reply);
  }

  /** spawn reports a start failure as an "error" event, and "close" may follow it: one answer per run. */
  private answer(run: Run, reply: { outcome: WireOutcome } | StartError): void {
    if (run.answered) return;
    run.answered = true;
    this.send({ id: run.id, ...reply });
  }

  private end(run: Run, reply: { outcome: WireOutcome } | StartError): void {
    clearTimeout(run.timer);
    clearTimeout(run.grace);
    if (run.pid !== undefined) this.groups.delete(run.pid);
    this.answer(run, reply);
  }

  private finish(run: Run): void {
    const stdout = new Uint8Array(Buffer.concat(run.stdout));
    const stderrTail = run.stderrTail.toString("utf8").trim();
    const { exited, failure, outputHeldOpen } = run;
    this.end(run, { outcome: { stdout, stderrTail, exitCode: exited.code, signal: exited.signal, failure, outputHeldOpen } });
  }

  private killAll(run: Run): void {
    if (run.pid === undefined) return;
    this.killGroup(run.pid);
    this.killPipeHolders(run.pipes);
  }

  /**
   * Once the helper has exited or been killed, its pipes get pipeGraceMs to reach EOF; then
   * whatever holds them is killed and the launcher stops reading them.
   */
  private closeAfterGrace(run: Run): void {
    if (run.grace !== undefined || run.answered) return;
    run.grace = setTimeout(() => {
      run.outputHeldOpen = true;
      this.killAll(run);
      for (const stream of [run.child.stdin, run.child.stdout, run.child.stderr]) stream.destroy();
      this.finish(run);
    }, this.pipeGraceMs);
  }

  private stop(run: Run, reason: NonNullable<WireOutcome["failure"]>): void {
    if (run.failure !== undefined) return;
    run.failure = reason;
    this.killAll(run);
    this.closeAfterGrace(run);
  }
}

/** The launcher's program as `node -e` text. It only uses Node's built-in modules. */
export const LAUNCHER_SOURCE = `
new (${LauncherProgram.toString()})({ spawn: require("node:child_process").spawn, fs: require("node:fs") }, ${PIPE_GRACE_MS}).start();
`;
