/**
 * How long the operator CLI takes to answer `status --site local --deployment local` against
 * `npm run local:services`, installed as docs/operations.md says (the packed tarball, production
 * dependencies only), by each way of starting it: the installed bin (what the docs name), and
 * `npx choria-provisioner` in the install directory and in this checkout, for comparison. Each
 * way runs once cold, then --runs times, the ways taking turns so the machine's load falls on all
 * alike; prints the median, min and max wall time of each and the 1-minute load. A figure, not a
 * test: the time depends on the machine and what else it runs.
 *
 *   npm run bench:cli [-- --runs 11]
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { installPackedCli, startLocalServices } from "../dev/local/packed-cli";
import { parsedOptions, runBenchmark, wholeNumber } from "./command";
import { percentile } from "./measure";

const ROOT = resolve(import.meta.dirname, "..");
const STATUS = ["status", "--site", "local", "--deployment", "local"];

/** The number of timed runs of each way, from --runs (default 11); read before the services start. */
function parseRuns(): number {
  return wholeNumber("bench:cli", "--runs", parsedOptions("bench:cli", { runs: { type: "string" } }).runs, 11);
}

interface Way {
  name: string;
  command: string;
  args: string[];
  cwd: string;
  timesMs: number[];
}

/** Runs one way once with the services' export lines as its environment; its wall time in ms. */
async function timeOnce(way: Way, exports: Record<string, string>): Promise<number> {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, npm_config_update_notifier: "false", ...exports };
  const started = performance.now();
  const { stdout } = await promisify(execFile)(way.command, way.args, { cwd: way.cwd, env });
  const elapsed = performance.now() - started;
  if (!stdout.includes('site "local"')) throw new Error(`${way.name} did not answer status: ${stdout}`);
  return elapsed;
}

function report(way: Way, coldMs: number): string {
  const sorted = [...way.timesMs].sort((a, b) => a - b);
  const seconds = (ms: number | undefined) => `${((ms ?? Number.NaN) / 1000).toFixed(2)} s`;
  return `${way.name.padEnd(52)} median ${seconds(percentile(sorted, 50))}  min ${seconds(sorted[0])}  max ${seconds(sorted.at(-1))}  cold ${seconds(coldMs)}`;
}

async function main(): Promise<void> {
  const runs = parseRuns();
  const dir = await mkdtemp(join(tmpdir(), "cli-start-"));
  const services = await startLocalServices(ROOT);
  try {
    const packed = await installPackedCli(ROOT, dir);
    const ways: Way[] = [
      { name: "installed bin: choria-provisioner (documented)", command: packed.bin, args: STATUS, cwd: packed.installDir, timesMs: [] },
      { name: "npx choria-provisioner, in the install directory", command: "npx", args: ["choria-provisioner", ...STATUS], cwd: packed.installDir, timesMs: [] },
      { name: "npx choria-provisioner, in the checkout", command: "npx", args: ["choria-provisioner", ...STATUS], cwd: ROOT, timesMs: [] },
    ];
    const loadBefore = loadavg()[0] ?? 0;
    const coldMs: number[] = [];
    for (const way of ways) coldMs.push(await timeOnce(way, services.exports));
    for (let run = 0; run < runs; run++) {
      for (const way of ways) way.timesMs.push(await timeOnce(way, services.exports));
    }
    const loadAfter = loadavg()[0] ?? 0;
    process.stdout.write(`choria-provisioner status against npm run local:services, ${runs} runs each (node ${process.version}, ${cpus().length} cores)\n`);
    ways.forEach((way, index) => process.stdout.write(`${report(way, coldMs[index] ?? Number.NaN)}\n`));
    process.stdout.write(`1-minute load: ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after\n`);
  } finally {
    await services.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

runBenchmark("cli-start benchmark", main);
