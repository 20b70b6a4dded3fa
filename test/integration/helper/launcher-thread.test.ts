/**
 * The launcher thread's crash path: a thread that dies leaves its runs' outcomes unknown, which is
 * a HelperError naming the death (never a silent hang), and the next run gets a new thread. The
 * thread's program here is the real one behind a listener that kills the thread when a run names
 * the file "/die" (process.exit) or "/throw" (an uncaught exception: "error", then "exit").
 */
import { describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { LAUNCHER_THREAD_SOURCE, LauncherThread, type LaunchRequest } from "../../../lib/helper/launcher-thread";

const DYING_SOURCE = `
require("node:worker_threads").parentPort.on("message", (request) => {
  if (request.file === "/die") process.exit(3);
  if (request.file === "/throw") throw new Error("launcher thread broke");
});
${LAUNCHER_THREAD_SOURCE}`;

function run(file: string, args: string[] = [], envId = 1): LaunchRequest {
  return { file, args, envId, input: new Uint8Array(), timeoutMs: 10_000, maxOutputBytes: 1 << 20, stderrKeptBytes: 1024 };
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("launcher thread", () => {
  it("rejects the runs of a thread that exited, naming its exit code, and starts a new thread for the next run", async () => {
    // Arrange
    const launcher = new LauncherThread(DYING_SOURCE);
    const envId = launcher.environment({ PATH: process.env.PATH });

    // Act
    const dead = await errorOf(launcher.launch(run("/die", [], envId)));
    const next = await launcher.launch(run("/bin/echo", ["after the crash"], envId));

    // Assert
    expect(dead).toBeInstanceOf(HelperError);
    expect((dead as Error).message).toBe("the helper launcher thread exited with code 3; the run's outcome is unknown");
    expect({ stdout: next.stdout.toString("utf8"), exitCode: next.exitCode }).toEqual({ stdout: "after the crash\n", exitCode: 0 });
  });

  it("gives a thread's uncaught error as the cause, and its later exit does not reject the new thread's run", async () => {
    // Arrange
    const launcher = new LauncherThread(DYING_SOURCE);
    const envId = launcher.environment({ PATH: process.env.PATH });
    let replacement: Promise<unknown> | undefined;

    // Act: the replacement run is launched as soon as the first is rejected on "error", before the
    // dead thread's "exit" arrives.
    const broken = await errorOf(
      launcher.launch(run("/throw", [], envId)).catch((error: unknown) => {
        replacement = launcher.launch(run("/bin/echo", ["still here"], envId));
        throw error;
      }),
    );
    const next = await replacement;

    // Assert
    expect((broken as Error).message).toBe("the helper launcher thread failed; the run's outcome is unknown");
    expect(((broken as Error).cause as Error).message).toBe("launcher thread broke");
    expect(next).toMatchObject({ exitCode: 0 });
    expect((next as { stdout: Buffer }).stdout.toString("utf8")).toBe("still here\n");
  });
});
