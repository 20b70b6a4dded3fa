/** The launcher's program, as the text its process runs (lib/helper/launcher.ts starts it with `node -e`). */

/**
 * How long a run waits for its helper's stdout and stderr to reach EOF after the helper exited or
 * was killed. A pipe normally closes with its last writer at once; this only bounds the wait for a
 * process the helper left behind, so a run lasts at most helper_timeout plus this.
 */
const PIPE_GRACE_MS = 500;

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
