/**
 * Wire benchmark: a real nats-server and a 2,000-node simulated fleet. Measures broadcast
 * discovery (median of several runs) and rpcutil#inventory round trips per second through
 * NatsChoriaRpc, sequentially and with 1/16/64/256 calls in flight.
 * Run: npx tsx bench/wire.ts   (writes reports/wire.json and reports/wire.md)
 */
import { mkdir, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { connect } from "nats";
import { BroadcastDiscoverer } from "../lib/nats/discovery";
import { NatsChoriaRpc } from "../lib/nats/rpc-client";
import { startNats } from "../dev/local/services";
import { startFleet } from "../dev/simulator";
import { median } from "./measure";

const NODES = Number(process.env.WIRE_NODES ?? 2_000);
const DISCOVERY_RUNS = 5;
const SEQUENTIAL_CALLS = 500;
const CONCURRENT_CALLS = 4_000;
const CONCURRENCY = [1, 16, 64, 256];

const client = {
  senderId: "provisioner.example.net",
  callerId: "choria=provisioner.mcollective",
  protocolVersion: 1 as const,
  signer: { version: 1 as const, kind: "insecure" as const },
};

async function main(): Promise<void> {
  const nats = await startNats();
  const fleetStarted = performance.now();
  const fleet = await startFleet({ natsUrl: nats.url, count: NODES, token: "bench-provisioning-token", recordDiscovery: false });
  const fleetStartMs = performance.now() - fleetStarted;
  const nc = await connect({ servers: nats.url, name: "wire-bench" });
  try {
    const discoverer = new BroadcastDiscoverer(nc, client);
    const discoveries: Array<{ ms: number; found: number }> = [];
    for (let run = 0; run < DISCOVERY_RUNS; run++) {
      const started = performance.now();
      const result = await discoverer.discoverWithStats();
      discoveries.push({ ms: performance.now() - started, found: result.identities.length });
    }

    const rpc = new NatsChoriaRpc(nc, client);
    const inventory = (index: number) =>
      rpc.call({ identity: fleet.identities[index % fleet.identities.length] as string, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 4_000 });

    const sequentialStarted = performance.now();
    for (let index = 0; index < SEQUENTIAL_CALLS; index++) await inventory(index);
    const sequentialSeconds = (performance.now() - sequentialStarted) / 1000;

    const concurrent: Array<{ inFlight: number; calls: number; seconds: number; perSecond: number; failures: number }> = [];
    for (const inFlight of CONCURRENCY) {
      let next = 0;
      let failures = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < CONCURRENT_CALLS) {
            const index = next++;
            await inventory(index).catch(() => (failures += 1));
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      concurrent.push({ inFlight, calls: CONCURRENT_CALLS, seconds, perSecond: CONCURRENT_CALLS / seconds, failures });
    }

    const report = {
      generatedAt: new Date().toISOString(),
      machine: { cpus: cpus().length, model: cpus()[0]?.model ?? "unknown", node: process.version },
      nodes: NODES,
      fleetStartMs,
      discovery: {
        runs: discoveries,
        medianMs: median(discoveries.map((run) => run.ms)) ?? NaN,
        note: "includes the 300 ms quiet window after the last reply",
      },
      inventory: {
        sequential: { calls: SEQUENTIAL_CALLS, seconds: sequentialSeconds, perSecond: SEQUENTIAL_CALLS / sequentialSeconds },
        concurrent,
      },
    };
    await mkdir("reports", { recursive: true });
    await writeFile("reports/wire.json", `${JSON.stringify(report, null, 2)}\n`);
    await writeFile("reports/wire.md", markdown(report));
    console.log(markdown(report));
  } finally {
    await nc.close();
    await fleet.stop();
    await nats.stop();
  }
}

function markdown(report: {
  generatedAt: string;
  machine: { cpus: number; model: string; node: string };
  nodes: number;
  fleetStartMs: number;
  discovery: { runs: Array<{ ms: number; found: number }>; medianMs: number };
  inventory: {
    sequential: { calls: number; perSecond: number };
    concurrent: Array<{ inFlight: number; calls: number; perSecond: number; failures: number }>;
  };
}): string {
  const lines = [
    "# Wire benchmark",
    "",
    `Generated ${report.generatedAt} on ${report.machine.cpus} CPU(s) (${report.machine.model}), Node ${report.machine.node}.`,
    `One nats-server and ${report.nodes} simulated provisioning-mode nodes in the same process as the client; fleet start ${report.fleetStartMs.toFixed(0)} ms.`,
    "",
    "## Broadcast discovery",
    "",
    `Median ${report.discovery.medianMs.toFixed(0)} ms over ${report.discovery.runs.length} runs (includes the 300 ms quiet window after the last reply).`,
    "",
    "| run | ms | nodes found |",
    "|---|---|---|",
    ...report.discovery.runs.map((run, index) => `| ${index + 1} | ${run.ms.toFixed(0)} | ${run.found} |`),
    "",
    "## rpcutil#inventory through NatsChoriaRpc",
    "",
    "| mode | calls | round trips / s | failures |",
    "|---|---|---|---|",
    `| sequential | ${report.inventory.sequential.calls} | ${report.inventory.sequential.perSecond.toFixed(0)} | 0 |`,
    ...report.inventory.concurrent.map((level) => `| ${level.inFlight} in flight | ${level.calls} | ${level.perSecond.toFixed(0)} | ${level.failures} |`),
    "",
  ];
  return lines.join("\n");
}

await main();
