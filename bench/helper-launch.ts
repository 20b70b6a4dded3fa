/**
 * What starting one helper costs the provision function's main thread, on this Node: the
 * synchronous part of `child_process.spawn` (libuv's fork + exec, which copies the parent's page
 * tables and blocks the event loop meanwhile) and the whole run through ExecHelperRunner, for the
 * bash + jq helper and the compiled one, in a process holding a heap like a provision container's.
 *
 *   npx tsx bench/helper-launch.ts [--runs 200] [--heap-mb 150]
 */
import { spawn } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { HELPERS } from "../dev/local/stack";
import { ExecHelperRunner } from "../lib/helper/exec-runner";
import { buildCompiledHelper } from "./compiled-helper";
import { percentile } from "./measure";

/** An unknown option is a usage mistake: one line, exit 2, as in every command of the project. */
function parseOptions() {
  try {
    return parseArgs({ options: { runs: { type: "string" }, "heap-mb": { type: "string" } } }).values;
  } catch (error) {
    process.stderr.write(`helper-launch: ${(error as Error).message}\n`);
    process.exit(2);
  }
}

const values = parseOptions();
const RUNS = Number(values.runs ?? 200);
const HEAP_MB = Number(values["heap-mb"] ?? 150);

/** Live objects the size of a provision container's heap (VmHWM 150-230 MB in bench:peer), kept reachable. */
const ballast: number[][] = [];
for (let i = 0; i < HEAP_MB; i++) ballast.push(Array.from({ length: 131_072 }, (_, j) => j));

const request = { identity: "n1.example.net", csr: null, ed25519_pubkey: { directory: "/etc/choria" }, inventory: "{}", jwt: null };

async function measure(name: string, command: string): Promise<Record<string, number | string | undefined>> {
  const spawnMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    const child = spawn(command, [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    spawnMs.push(performance.now() - started);
    child.stdin.end(JSON.stringify(request));
    child.stdout.resume();
    await new Promise((done) => child.once("close", done));
  }
  const runner = new ExecHelperRunner({ command });
  const runMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await runner.run(request as never);
    runMs.push(performance.now() - started);
  }
  const sort = (list: number[]) => [...list].sort((a, b) => a - b);
  const round = (value: number | undefined) => (value === undefined ? undefined : Math.round(value * 100) / 100);
  return {
    helper: name,
    spawn_sync_ms_p50: round(percentile(sort(spawnMs), 50)),
    spawn_sync_ms_p99: round(percentile(sort(spawnMs), 99)),
    run_ms_p50: round(percentile(sort(runMs), 50)),
    run_ms_p99: round(percentile(sort(runMs), 99)),
  };
}

const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
process.stdout.write(`Node ${process.version}, RSS ${rss} MB, ${RUNS} runs each, ${cpus().length} cores, load ${loadavg()[0]?.toFixed(2)} at start\n`);
for (const [name, command] of [["bash + jq", HELPERS.bash], ["compiled", buildCompiledHelper()]] as const) {
  process.stdout.write(`${JSON.stringify(await measure(name, command))}\n`);
}
process.stdout.write(`load ${loadavg()[0]?.toFixed(2)} at end; ballast ${ballast.length}\n`);
