/**
 * The CLI's command line: every mistake is one line in the CLI's own words, naming the command and
 * where its help is, with exit code 2, before anything is opened (no AWS is reached here).
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../../../cli/cli";

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text), env: {} });
  return { code, stdout, stderr };
}

describe("choria-provisioner usage mistakes", () => {
  it.each([
    [["status", "--foo"], "unknown option --foo for status; see choria-provisioner status --help"],
    [["status", "-x"], "unknown option -x for status; see choria-provisioner status --help"],
    [["status", "--force"], "unknown option --force for status; see choria-provisioner status --help"],
    [["dlq", "list", "--all"], "unknown option --all for dlq list; see choria-provisioner dlq list --help"],
    [["election", "info", "--foo"], "unknown option --foo for election view; see choria-provisioner election view --help"],
    [["--foo"], "unknown option --foo; see choria-provisioner --help"],
    [["status", "--site"], "option --site needs a value; see choria-provisioner status --help"],
    [["status", "--site", "--json"], "option --site needs a value; see choria-provisioner status --help"],
    [["status", "--json=yes"], "option --json takes no value; see choria-provisioner status --help"],
    [["stauts"], 'unknown command "stauts"; see choria-provisioner --help'],
    [["dlq", "purge"], 'unknown dlq command "purge"; see choria-provisioner dlq --help'],
    [["status", "extra"], 'status takes no arguments, not "extra"; see choria-provisioner status --help'],
    [["registry", "merge", "some-table"], 'registry merge takes no arguments, not "some-table"; see choria-provisioner registry merge --help'],
  ])("%j is refused in one line of its own words", async (args, message) => {
    const result = await cli(...args);

    expect(result).toEqual({ code: 2, stdout: "", stderr: `choria-provisioner: ${message}\n` });
  });

  it("says a broken provisioner config in one line, whatever the parser's message spans", async () => {
    const config = join(await mkdtemp(join(tmpdir(), "cli-usage-")), "provisioner.yaml");
    await writeFile(config, "site: [unclosed\n  deployment_id: x\n");

    const result = await cli("status", "--config", config);

    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^choria-provisioner: the provisioner config is not valid YAML: [^\n]+; see choria-provisioner status --help\n$/);
  });
});

describe("choria-provisioner help", () => {
  it("prints a command's own usage with the options every command takes", async () => {
    const result = await cli("reprovision", "--help");

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/^Usage:\n {2}reprovision <identity>\.\.\. \[--force\]\n/);
    expect(result.stdout).toContain("--stage NAME");
    expect(result.stdout).not.toContain("dlq requeue");
  });

  it("lists every command with --help, and on stderr with exit code 2 when none is given", async () => {
    const help = await cli("--help");
    const none = await cli();

    expect(help.code).toBe(0);
    for (const command of ["status", "election view | info", "dlq list", "dlq requeue", "pause", "resume", "reprovision", "renew", "registry merge"]) {
      expect(help.stdout).toContain(`\n  ${command}`);
    }
    expect(none).toEqual({ code: 2, stdout: "", stderr: help.stdout });
  });
});
