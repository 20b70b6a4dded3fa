/**
 * The README's `sls invoke local` recipe, run as written: `npm run local:services -- --fleet 3` in one
 * process, then each line of the README's terminal-2 block in a shell with the export lines it
 * printed, every function serverless.yml declares invoked and its answer checked, and the effects
 * checked where they land (the registry through `status`, the lease). docs/deploy.md's recipe must
 * be the same commands. It broke once without a test noticing: a CloudFormation function in the
 * provider environment made every local invoke fail.
 *
 * Each invocation bundles its function into the service's `.esbuild` directory, which `sls package`
 * (the deploy project) would share, so the recipe runs in a copy of the service.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { cp, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processOutput } from "../support/process-output";

const ROOT = resolve(__dirname, "../..");
/** What a copy of the service needs to package a function and to run the recipe's scripts. */
const SERVICE_PARTS = ["serverless.yml", "package.json", "tsconfig.json", "config", "handlers", "lib", "scripts", "examples", "dev"];
const FLEET = ["node1.local.example.net", "node2.local.example.net", "node3.local.example.net"];
/** config/local.yaml's `lease.renew_interval`, and the keeper's schedule (KEEPER_RATE_SECONDS unset: a minute). */
const RENEW_INTERVAL_S = 10;
const KEEPER_RATE_S = 60;

type Json = Record<string, unknown>;

let services: ChildProcess | undefined;
let servicesEnv: Record<string, string> = {};
let workDir = "";
/** Each function's answer, by the recipe line that invoked it. */
const answers = new Map<string, Json>();
/** Every answer of each function, in the order the recipe invoked it. */
const everyAnswer = new Map<string, Json[]>();

/** The command lines of the fenced block of `file` whose first line starts with `first`, comments dropped. */
async function recipe(file: string, first: string): Promise<string[]> {
  const text = await readFile(join(ROOT, file), "utf8");
  const block = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map(([, body]) => body as string).find((body) => body.startsWith(first));
  if (block === undefined) throw new Error(`${file} has no sh block starting with ${first}`);
  return block
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

async function copyService(into: string): Promise<string> {
  for (const part of SERVICE_PARTS) await cp(join(ROOT, part), join(into, part), { recursive: true });
  await symlink(join(ROOT, "node_modules"), join(into, "node_modules"));
  return into;
}

/** `export NAME=value` lines, as the services print them for pasting. */
function exportsOf(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/^export (\w+)=(\S+)$/gm)].map(([, name, value]) => [name as string, value as string]));
}

/** One recipe line in bash, in `cwd`, with the pasted export lines. */
function shell(line: string, cwd: string): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawn("bash", ["-c", `set -euo pipefail; ${line}`], { cwd, env: { ...process.env, ...servicesEnv }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolveRun(stdout) : reject(new Error(`${line} exited ${code}:\n${stdout.slice(-3_000)}\n${stderr.slice(-3_000)}`))));
  });
}

/** `sls invoke local` prints the handler's logs, then its answer as indented JSON starting at a line of `{`. */
function answerOf(output: string): Json {
  const start = output.startsWith("{\n") ? 0 : output.lastIndexOf("\n{\n") + 1;
  if (start === 0 && !output.startsWith("{\n")) throw new Error(`no answer in the output:\n${output.slice(-3_000)}`);
  return JSON.parse(output.slice(start)) as Json;
}

const invokedFunction = (line: string) => /^scripts\/sls-local\.sh (\w+)/.exec(line)?.[1];

/** Runs one line; an invocation's answer is kept under its function's name (the last one wins), and in `everyAnswer`. */
async function runLine(line: string, cwd: string): Promise<void> {
  const output = await shell(line, cwd);
  const fn = invokedFunction(line);
  if (fn === undefined) return;
  const answer = answerOf(output);
  answers.set(fn, answer);
  everyAnswer.set(fn, [...(everyAnswer.get(fn) ?? []), answer]);
}

/** The recipe in order in `main`. */
async function runRecipe(lines: string[], main: string): Promise<void> {
  for (const line of lines) await runLine(line, main);
}

const registry = (status: Json) => status.registry as { total: number; byState: Record<string, number> };

describe("the README's sls invoke local recipe, every function, against npm run local:services", () => {
  let readme: string[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), "sls-invoke-local-"));
    readme = await recipe("README.md", "npm run local:services");
    services = spawn("npm", ["run", "local:services", "--", "--fleet", String(FLEET.length)], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, npm_config_update_notifier: "false" },
    });
    const io = processOutput(services);
    await io.waitFor(/^# nodes: .*$/m);
    servicesEnv = exportsOf(io.text());
    // Terminal 2: the status before anything ran, then the recipe as written.
    const main = await copyService(join(workDir, "main"));
    await runLine("scripts/sls-local.sh status", main);
    answers.set("status before", answers.get("status") as Json);
    await runRecipe(readme.slice(1), main);
    await runLine("scripts/sls-local.sh status", main);
  }, 420_000);

  afterAll(async () => {
    if (services?.pid !== undefined && services.exitCode === null) {
      const exited = new Promise((done) => services?.once("exit", done));
      process.kill(-services.pid, "SIGINT");
      await exited;
    }
    if (workDir) await rm(workDir, { recursive: true, force: true });
  }, 60_000);

  it("starts the services with the recipe's first line", () => {
    expect(readme[0]).toBe(`npm run local:services -- --fleet ${FLEET.length}`);
  });

  it("invokes every function serverless.yml declares", async () => {
    const functionsBlock = (await readFile(join(ROOT, "serverless.yml"), "utf8")).split(/^functions:$/m)[1]?.split(/^\S/m)[0] ?? "";
    const declared = [...functionsBlock.matchAll(/^ {2}(\w+):$/gm)].map(([, name]) => name as string);

    expect(declared.length).toBeGreaterThan(0);
    expect(readme.map(invokedFunction).filter((fn) => fn !== undefined).sort()).toEqual(expect.arrayContaining(declared.sort()));
  });

  it("docs/deploy.md's recipe is the README's commands", async () => {
    const deploy = [...(await recipe("docs/deploy.md", "scripts/sls-local.sh status")), ...(await recipe("docs/deploy.md", "node --import tsx scripts/sqs-event.ts"))];

    expect(deploy.length).toBeGreaterThan(0);
    expect(readme).toEqual(expect.arrayContaining(deploy));
  });

  it("status, discover, reprovision and provision: the fleet ends provisioned in the registry", () => {
    expect(registry(answers.get("status before") as Json).total).toBe(0);
    expect(answers.get("discover")).toMatchObject({ paused: false, discovered: FLEET.length, admitted: FLEET.length });
    expect(answers.get("reprovision")?.admitted).toEqual([FLEET[0]]);
    expect(answers.get("provision")).toEqual({ batchItemFailures: [] });
    expect(registry(answers.get("status") as Json).byState.provisioned).toBe(FLEET.length);
  });

  it("lifecycle admits a startup event, then runs a tick; the keeper keeps the lease and arms a tick per renew_interval of the minute ahead", () => {
    expect(everyAnswer.get("lifecycle")).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    // The lease discover won is kept (not won again), and SQS took every tick.
    expect(answers.get("leaseKeeper")).toEqual({ holding: true, armed: KEEPER_RATE_S / RENEW_INTERVAL_S });
  });

  it("renew answers that config/local.yaml leaves renewal off", () => {
    expect(answers.get("renew")).toEqual({ status: "not-configured" });
  });

  it("release gives the lease up, as status then shows", () => {
    expect(answers.get("release")).toEqual({ released: true });
    expect((answers.get("status") as Json).lease).toMatchObject({ heldByThisDeployment: false });
  });
});
