/**
 * The launcher process's crash path: a launcher that dies leaves its runs' outcomes unknown, which
 * is a HelperError naming the death (never a silent hang), and the next run gets a new launcher.
 * The launcher's program here is the real one behind a listener that kills it when a run names the
 * file "/die" (process.exit) or "/throw" (an uncaught exception, reported over IPC before the exit).
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { functionBundleOptions } from "../../../scripts/function-bundle-options";
import { HelperError } from "../../../lib/errors";
import { HelperLauncher } from "../../../lib/helper/launcher";
import { LAUNCHER_SOURCE, type LaunchRequest } from "../../../lib/helper/launcher-program";

const DYING_SOURCE = `
process.on("message", (request) => {
  if (request.file === "/die") process.exit(3);
  if (request.file === "/throw") throw new Error("launcher broke");
});
${LAUNCHER_SOURCE}`;

function run(file: string, args: string[] = [], envId = 1): LaunchRequest {
  return { file, args, envId, input: new Uint8Array(), timeoutMs: 10_000, maxOutputBytes: 1 << 20, stderrKeptBytes: 1024 };
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("helper launcher process", () => {
  it("rejects the runs of a launcher that exited, naming its exit code, and starts a new launcher for the next run", async () => {
    // Arrange
    const launcher = new HelperLauncher(DYING_SOURCE);
    const envId = launcher.environment({ PATH: process.env.PATH });

    // Act
    const dead = await errorOf(launcher.launch(run("/die", [], envId)));
    const next = await launcher.launch(run("/bin/echo", ["after the crash"], envId));

    // Assert
    expect(dead).toBeInstanceOf(HelperError);
    expect((dead as Error).message).toBe("the helper launcher exited with code 3; the run's outcome is unknown");
    expect({ stdout: next.stdout.toString("utf8"), exitCode: next.exitCode }).toEqual({ stdout: "after the crash\n", exitCode: 0 });
  });

  it("gives a launcher's uncaught error as the cause, and the next run gets a new launcher", async () => {
    // Arrange
    const launcher = new HelperLauncher(DYING_SOURCE);
    const envId = launcher.environment({ PATH: process.env.PATH });
    let replacement: Promise<unknown> | undefined;

    // Act: the replacement run is launched as soon as the first is rejected.
    const broken = await errorOf(
      launcher.launch(run("/throw", [], envId)).catch((error: unknown) => {
        replacement = launcher.launch(run("/bin/echo", ["still here"], envId));
        throw error;
      }),
    );
    const next = await replacement;

    // Assert
    expect((broken as Error).message).toBe("the helper launcher exited with code 70; the run's outcome is unknown");
    expect(((broken as Error).cause as Error).message).toBe("launcher broke");
    expect(next).toMatchObject({ exitCode: 0 });
    expect((next as { stdout: Buffer }).stdout.toString("utf8")).toBe("still here\n");
  });
});

describe("helper launcher process, its provisioner gone", () => {
  it("kills its helpers' process groups and exits when the provisioner dies", async () => {
    // Arrange: a provisioner of its own (a Node process with the real HelperLauncher) runs a helper
    // that records its pid, then sleeps. The test kills that provisioner with SIGKILL.
    const dir = await mkdtemp(join(tmpdir(), "launcher-"));
    const pidFile = join(dir, "helper.pid");
    const provisioner = `
      import { HelperLauncher } from ${JSON.stringify(fileURLToPath(new URL("../../../lib/helper/launcher.ts", import.meta.url)))};
      const launcher = new HelperLauncher();
      const envId = launcher.environment({ PATH: process.env.PATH });
      void launcher.launch({ file: "/bin/sh", args: ["-c", "echo $$ > ${pidFile}; exec sleep 30"], envId, input: new Uint8Array(), timeoutMs: 30000, maxOutputBytes: 1024, stderrKeptBytes: 1024 });
    `;
    const parent = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", provisioner], { stdio: "ignore" });
    const helperPid = await eventually(async () => Number((await readFile(pidFile, "utf8").catch(() => "")).trim()) || undefined);

    // Act
    parent.kill("SIGKILL");

    // Assert: the helper is gone within the launcher's reaction to its closed channel.
    await eventually(async () => (alive(helperPid) ? undefined : true));
    expect(alive(helperPid)).toBe(false);
    await rm(dir, { recursive: true, force: true });
  });
});

describe("helper launcher program, from a function bundle", () => {
  it("runs helpers to each of their ends when the launcher's text comes from a bundle built as serverless.yml builds the functions", async () => {
    // Arrange: a bundle of the real HelperLauncher (minified, keepNames: the program's text is
    // LauncherProgram's source as the bundle has it), which runs one helper per way a run ends.
    const dir = await mkdtemp(join(tmpdir(), "launcher-bundle-"));
    const bundle = join(dir, "launcher.cjs");
    await build({ ...BUNDLE_ENTRY, ...(await functionBundleOptions(ROOT)), outfile: bundle, logLevel: "silent" });

    // Act
    const { stdout } = await promisify(execFile)(process.execPath, [bundle], { env: { PATH: process.env.PATH } });
    await rm(dir, { recursive: true, force: true });

    // Assert
    expect(JSON.parse(stdout)).toEqual({
      completed: { stdout: "hello", stderrTail: "to stderr", exitCode: 0, signal: null },
      timedOut: { stdout: "", stderrTail: "", exitCode: null, signal: "SIGKILL", failure: "timeout" },
      tooLarge: { stdout: "", stderrTail: "", exitCode: null, signal: "SIGKILL", failure: "too-large" },
      heldOpen: { stdout: "out\n", stderrTail: "", exitCode: 0, signal: null, outputHeldOpen: true },
      notStarted: { startError: "ENOENT" },
    });
  });
});

const ROOT = resolve(import.meta.dirname, "../../..");

/**
 * The bundle's entry: one run for each end (exit, timeout, too much output, output held open by a
 * process the helper left, no start), printed as JSON with stdout as text.
 */
const BUNDLE_ENTRY = {
  absWorkingDir: ROOT,
  stdin: {
    resolveDir: ROOT,
    loader: "ts" as const,
    sourcefile: "launcher-bundle-entry.ts",
    contents: `
      import { HelperLauncher } from "./lib/helper/launcher";
      const launcher = new HelperLauncher();
      const envId = launcher.environment({ PATH: process.env.PATH });
      const run = (file: string, args: string[], limits: { timeoutMs?: number; maxOutputBytes?: number } = {}, input = "") =>
        launcher
          .launch({ file, args, envId, input: new TextEncoder().encode(input), timeoutMs: 10_000, maxOutputBytes: 1 << 20, stderrKeptBytes: 1024, ...limits })
          .then(
            ({ stdout, ...outcome }) => ({ stdout: stdout.toString("utf8"), ...JSON.parse(JSON.stringify(outcome)) }),
            (error: { code: string }) => ({ startError: error.code }),
          );
      void (async () => {
        const outcomes = {
          completed: await run("/bin/sh", ["-c", "cat; echo to stderr >&2"], {}, "hello"),
          timedOut: await run("/bin/sleep", ["5"], { timeoutMs: 200 }),
          tooLarge: await run("/bin/sh", ["-c", "head -c 4096 /dev/zero; sleep 5"], { maxOutputBytes: 100 }),
          heldOpen: await run("/bin/sh", ["-c", "sleep 5 & echo out"]),
          notStarted: await run("/nonexistent/helper", []),
        };
        process.stdout.write(JSON.stringify(outcomes));
      })();
    `,
  },
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `probe` every 50 ms for up to 10 s until it gives a value. */
async function eventually<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + 10_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
