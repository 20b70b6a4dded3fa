/**
 * What a person sees in a terminal: `npm run local` driven in a pseudo-terminal (util-linux
 * `script`), so the progress line is the live, rewritten one. Every invocation's Powertools EMF
 * flush would print a JSON document on stdout, through that line; nothing but our own text may
 * appear, during the run, after it with --keep-running (the export block), and after Ctrl-C.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { processOutput } from "../support/process-output";

const ROOT = resolve(import.meta.dirname, "../..");

/** Resolves once `file` holds more than `count` lines containing `needle`. */
async function logGrows(file: string, needle: string, count: number): Promise<void> {
  const seen = () => readFileSync(file, "utf8").split("\n").filter((line) => line.includes(needle)).length;
  while (seen() <= count) await new Promise((resolveWait) => setTimeout(resolveWait, 200));
}

describe("npm run local in a terminal", () => {
  it("keeps the live line free of EMF JSON during the run, with --keep-running and after Ctrl-C", async () => {
    // script -e: its exit code is the command's; stdin is ours, so "\x03" is a real Ctrl-C on the pty.
    // script runs the command with $SHELL -c, in the terminal's foreground process group. `exec`: an
    // interactive shell keeps itself out of its job's group; bash -c would exec a lone command anyway,
    // but dash (/bin/sh, script's choice where SHELL is unset) stays and dies of the Ctrl-C itself,
    // and script then reports 130 while the run is still stopping. SHELL is pinned to that case.
    const child = spawn(
      "script",
      ["-qfec", "exec npm run local -- --fast --nodes 10 --helper inline --keep-running --timeout 300", "/dev/null"],
      { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, npm_config_update_notifier: "false", COLUMNS: "200", SHELL: "/bin/sh" } },
    );
    // The pseudo-terminal carries both of the run's streams on script's stdout.
    const io = processOutput(child, { stdoutOnly: true });
    const [, workDir, logPath] = await io.waitFor(/work dir (\S+); logs in (\S+)/);
    await io.waitFor(/stays up until Ctrl-C/);
    // The deployment's .env file is for `source`: the multi-line YAML comes back as written.
    const sourced = execFileSync("bash", ["-c", `set -e; source "$1"; printf %s "$PROVISIONER_CONFIG_YAML"`, "-", join(workDir as string, "primary.env")], {
      encoding: "utf8",
    });
    // A lease-keeper invocation that ends after the export block: its flush is one the old code printed.
    const finished = "lease keeper run finished";
    await logGrows(logPath as string, finished, readFileSync(logPath as string, "utf8").split(finished).length - 1);
    child.stdin?.write("\x03");
    const code = await new Promise<number | null>((resolveExit) => child.once("exit", resolveExit));
    const text = io.text();
    // Each rewrite of the live line starts with "\r"; every segment between them is one thing the user saw.
    const segments = text.split(/[\r\n]/).filter((segment) => segment.trim() !== "");

    expect(parseYaml(sourced)).toMatchObject({ site: "local", leader_election: true, deployment_id: "primary" });
    expect(text).toMatch(/all 10 nodes provisioned/);
    expect(text).toContain("interrupted: stopping everything");
    expect(segments.filter((segment) => segment.includes("[") && segment.includes("provisioned")).length).toBeGreaterThan(0);
    expect(segments.filter((segment) => /\{"|"_aws"/.test(segment))).toEqual([]);
    expect(code, text).toBe(0);
    // The orderly stop ran to its end: the work dir with the key files is gone.
    expect(existsSync(workDir as string)).toBe(false);
  }, 240_000);
});
