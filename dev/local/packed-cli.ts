/**
 * The operator CLI as an operator installs it (docs/operations.md, "Installing the CLI"): the
 * tarball `npm pack` makes in a checkout, installed with production dependencies only into an empty
 * directory; and the services of `npm run local:services`, with the `export` lines it prints, to
 * run that CLI against. Shared by the e2e test of the install and bench/cli-start.ts.
 */
import { execFile, spawn } from "node:child_process";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ProvisionerError } from "../../lib/errors";

/** npm run quietly from scripts: no "new version available" notice in output a caller reads. */
const NPM_ENV = { ...process.env, npm_config_update_notifier: "false" };

export interface PackedCli {
  /** The files in the tarball `npm pack` made, as `tar` lists them (`package/bin/...`). */
  files: string[];
  /** The installed bin, `<dir>/install/node_modules/.bin/choria-provisioner`. */
  bin: string;
  /** The directory it was installed into (`npx choria-provisioner` resolves it from there). */
  installDir: string;
  /** What `npm install` printed (stdout and stderr), for warnings. */
  installOutput: string;
}

/** A command that failed, with what it printed (npm's reasons are there, not in the exit code). */
class CommandFailedError extends ProvisionerError {}

async function run(command: string, args: string[], cwd: string): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, { cwd, env: NPM_ENV, maxBuffer: 16 * 1024 * 1024 });
    return `${stdout}${stderr}`;
  } catch (error) {
    const printed = error as { stdout?: string; stderr?: string };
    throw new CommandFailedError(`${command} ${args.join(" ")} failed in ${cwd}:\n${printed.stdout ?? ""}${printed.stderr ?? ""}`, { cause: error });
  }
}

/**
 * Packs the checkout at `root` into `<dir>/pack` (prepack builds the bundle) and installs the
 * tarball into `<dir>/install`, empty but for a manifest, with production dependencies only, as
 * docs/operations.md tells an operator to. `--prefer-offline`: the packages come from npm's cache
 * when the checkout's own install put them there.
 */
export async function installPackedCli(root: string, dir: string): Promise<PackedCli> {
  const packDir = join(dir, "pack");
  const installDir = join(dir, "install");
  await mkdir(packDir, { recursive: true });
  await mkdir(installDir, { recursive: true });
  await run("npm", ["pack", "--pack-destination", packDir], root);
  const [name] = (await readdir(packDir)).filter((file) => file.endsWith(".tgz"));
  if (name === undefined) throw new CommandFailedError(`npm pack left no tarball in ${packDir}`);
  const tarball = join(packDir, name);
  const files = (await run("tar", ["tzf", tarball], dir)).split("\n").filter((line) => line !== "");
  // Its own manifest, so npm installs here and not into a project it finds further up.
  await writeFile(join(installDir, "package.json"), `${JSON.stringify({ name: "choria-provisioner-install", private: true })}\n`);
  const installOutput = await run("npm", ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline", tarball], installDir);
  return { files, bin: join(installDir, "node_modules/.bin/choria-provisioner"), installDir, installOutput };
}

export interface LocalServices {
  /** The variables of its `export` lines, as an operator pastes them into a shell. */
  exports: Record<string, string>;
  /** Stops it as Ctrl-C does (SIGINT to its process group) and waits for it to exit. */
  stop(): Promise<void>;
}

const LAST_EXPORT = /^export SLS_LOCAL_STAGE=.*$/m;
const STARTUP_LIMIT_MS = 120_000;

/** Starts `npm run local:services` in the checkout at `root`, resolving once it has printed its export lines. */
export async function startLocalServices(root: string): Promise<LocalServices> {
  const child = spawn("npm", ["run", "local:services"], { cwd: root, detached: true, stdio: ["ignore", "pipe", "pipe"], env: NPM_ENV });
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-(child.pid as number), "SIGINT");
    await exited;
  };
  let printed = "";
  const ready = new Promise<void>((resolveReady, reject) => {
    const limit = setTimeout(() => reject(new CommandFailedError(`npm run local:services printed no export lines in ${STARTUP_LIMIT_MS / 1000} s:\n${printed}`)), STARTUP_LIMIT_MS);
    const onData = (chunk: Buffer) => {
      printed += chunk.toString();
      if (!LAST_EXPORT.test(printed)) return;
      clearTimeout(limit);
      resolveReady();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(limit);
      reject(new CommandFailedError(`npm run local:services exited (${code}) before its export lines:\n${printed}`));
    });
  });
  try {
    await ready;
  } catch (error) {
    await stop();
    throw error;
  }
  const exports = Object.fromEntries([...printed.matchAll(/^export (\w+)=(.*)$/gm)].map(([, name, value]) => [name as string, value as string]));
  return { exports, stop };
}
