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
import { HELPERS } from "../dev/local/stack";
import { ExecHelperRunner } from "../lib/helper/exec-runner";
import { parsedOptions, runBenchmark, wholeNumber } from "./command";
import { buildCompiledHelper } from "./compiled-helper";
import { percentile } from "./measure";

const request = { identity: "n1.example.net", csr: null, ed25519_pubkey: { directory: "/etc/choria" }, inventory: "{}", jwt: null };

async function measure(name: string, command: string, runs: number): Promise<Record<string, number | string | undefined>> {
  const spawnMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const child = spawn(command, [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    spawnMs.push(performance.now() - started);
    child.stdin.end(JSON.stringify(request));
    child.stdout.resume();
    await new Promise((done) => child.once("close", done));
  }
  const runner = new ExecHelperRunner({ command });
  const runMs: number[] = [];
  for (let i = 0; i < runs; i++) {
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

async function main(): Promise<void> {
  const values = parsedOptions("helper-launch", { runs: { type: "string" }, "heap-mb": { type: "string" } });
  const runs = wholeNumber("helper-launch", "--runs", values.runs, 200);
  const heapMb = wholeNumber("helper-launch", "--heap-mb", values["heap-mb"], 150, 0);
  // Live objects the size of a provision container's heap (VmHWM 150-230 MB in bench:peer), kept reachable to the end.
  const ballast: number[][] = [];
  for (let i = 0; i < heapMb; i++) ballast.push(Array.from({ length: 131_072 }, (_, j) => j));
  const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
  process.stdout.write(`Node ${process.version}, RSS ${rss} MB, ${runs} runs each, ${cpus().length} cores, load ${loadavg()[0]?.toFixed(2)} at start\n`);
  for (const [name, command] of [["bash + jq", HELPERS.bash], ["compiled", buildCompiledHelper()]] as const) {
    process.stdout.write(`${JSON.stringify(await measure(name, command, runs))}\n`);
  }
  process.stdout.write(`load ${loadavg()[0]?.toFixed(2)} at end; ballast ${ballast.length}\n`);
}

runBenchmark("helper-launch benchmark", main);
