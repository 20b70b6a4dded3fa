/**
 * A package script run as the README and docs tell an operator to run it, `npm run <script> --
 * <args>`, from the repository root whatever the test's working directory, and the temporary
 * report directories the benchmarks' tests point `--report-dir` at (the checkout's reports/ are
 * never rewritten by a test).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll } from "vitest";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..");

/** What a script that exited with another code than 0 left: its exit code and output. */
export interface ScriptFailure {
  code?: number;
  stdout?: string;
  stderr?: string;
}

/** Resolves with the script's output when it exits 0, rejects with a ScriptFailure otherwise. */
export function npmScript(script: string, args: readonly string[], options: { timeoutMs: number }) {
  return promisify(execFile)("npm", ["run", "--silent", script, "--", ...args], {
    cwd: REPO_ROOT,
    // npm's update check writes to stderr, which the tests of one-line usage errors read whole.
    env: { ...process.env, npm_config_update_notifier: "false" },
    timeout: options.timeoutMs,
  });
}

/** The script's failure, to assert on; undefined when it exited 0. */
export function failureOf(script: string, args: readonly string[], options: { timeoutMs: number }): Promise<ScriptFailure | undefined> {
  return npmScript(script, args, options).then(
    () => undefined,
    (error: ScriptFailure) => error,
  );
}

/** A maker of fresh temporary directories named `prefix`…, every one removed after the file's tests. */
export function temporaryDirs(prefix: string): () => Promise<string> {
  const made: string[] = [];
  afterAll(async () => {
    await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });
  return async () => {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}
