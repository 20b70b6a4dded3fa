/**
 * The operator CLI installed as docs/operations.md tells an operator to: `npm pack` in the checkout,
 * the tarball installed into an empty directory with production dependencies only, then
 * `choria-provisioner status --site local --deployment local` against `npm run local:services`
 * with its export lines. And a checkout installed without dev dependencies (`npm ci --omit=dev`)
 * installs cleanly and says how to get the CLI instead of failing.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installPackedCli, startLocalServices, type LocalServices, type PackedCli } from "../../dev/local/packed-cli";

const ROOT = resolve(import.meta.dirname, "../..");
/** npm's warnings (EBADENGINE, install scripts not covered by allowScripts, deprecations) all start so. */
const NPM_WARNING = /npm warn/i;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command` with only PATH and HOME besides `env`: an operator's shell with the export lines pasted. */
async function runCommand(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

describe("the operator CLI from the packed tarball", () => {
  let dir: string;
  let packed: PackedCli;
  let services: LocalServices | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "packed-cli-"));
    // Both at once; the services are kept (and so stopped after) even when the install fails.
    const starting = startLocalServices(ROOT).then((started) => (services = started));
    const installing = installPackedCli(ROOT, dir);
    await Promise.allSettled([starting, installing]);
    packed = await installing;
    await starting;
  }, 240_000);

  afterAll(async () => {
    await services?.stop();
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it("the tarball carries the built CLI and nothing of the checkout besides", () => {
    expect(packed.files).toEqual(
      expect.arrayContaining(["package/package.json", "package/bin/choria-provisioner.mjs", "package/dist/choria-provisioner.mjs"]),
    );
    expect(packed.files.filter((file) => !/^package\/(package\.json|README\.md|bin\/|dist\/)/.test(file))).toEqual([]);
  });

  it("installs with production dependencies only and without a warning", () => {
    expect(packed.installOutput).toMatch(/added \d+ packages/);
    expect(packed.installOutput).not.toMatch(NPM_WARNING);
  });

  it("answers status against npm run local:services, with nothing on stderr", async () => {
    const exports = services?.exports ?? {};
    const people = await runCommand(packed.bin, ["status", "--site", "local", "--deployment", "local"], packed.installDir, exports);
    const json = await runCommand(packed.bin, ["status", "--site", "local", "--deployment", "local", "--json"], packed.installDir, exports);

    expect(people, people.stderr).toMatchObject({ code: 0, stderr: "" });
    expect(people.stdout).toContain('site "local", deployment local');
    expect(people.stdout).toMatch(/^registry: 0 hosts/m);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ site: "local", deploymentId: "local", registry: { byState: { provisioned: 0 } } });
  });
});

describe("a checkout installed without dev dependencies", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "omit-dev-"));
    // What npm ci reads of a clean clone: the manifest, the lockfile, and the scripts they name.
    for (const path of ["package.json", "package-lock.json", "bin", "scripts/build-cli.mjs"]) await cp(join(ROOT, path), join(dir, path), { recursive: true });
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("npm ci --omit=dev succeeds without a warning, and the bin names the way to the CLI", async () => {
    const install = await runCommand("npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline"], dir, { npm_config_update_notifier: "false" });
    const cli = await runCommand(join(dir, "bin/choria-provisioner.mjs"), ["status"], dir);

    expect(install.code, `${install.stdout}${install.stderr}`).toBe(0);
    expect(`${install.stdout}${install.stderr}`).not.toMatch(NPM_WARNING);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toBe(
      "choria-provisioner: the CLI is not built: in a checkout, run npm run build:cli; to install it, use the tarball npm pack makes (docs/operations.md)\n",
    );
  }, 180_000);
});
