/**
 * Wire benchmark: a real nats-server and a simulated fleet (2,000 nodes by default). Measures
 * broadcast discovery (median of several runs) and rpcutil#inventory round trips per second through
 * NatsChoriaRpc, sequentially and with 1/16/64/256 calls in flight.
 *
 *   npm run bench:wire -- [--nodes 2000] [--calls 4000] [--report-dir reports]
 */
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "nats";
import { BroadcastDiscoverer } from "../lib/nats/discovery";
import { NatsChoriaRpc } from "../lib/nats/rpc-client";
import { startNats } from "../dev/local/services";
import { startFleet } from "../dev/simulator";
import { median, round2, roundTrips, type RoundTrips } from "./measure";
import { parsedOptions, reportDirOf, runBenchmark, wholeNumber } from "./command";

const DISCOVERY_RUNS = 5;
/** Sequential calls are an eighth of each concurrency level's: 500 of the default 4,000. */
const SEQUENTIAL_SHARE = 8;
const CONCURRENCY = [1, 16, 64, 256];

const client = {
  senderId: "provisioner.example.net",
  callerId: "choria=provisioner.mcollective",
  protocolVersion: 1 as const,
  signer: { version: 1 as const, kind: "insecure" as const },
};

const USAGE = `Usage: npm run bench:wire -- [--nodes <n>] [--calls <n>] [--report-dir <dir>]

Starts a nats-server and <nodes> simulated nodes (default: WIRE_NODES or 2000), times broadcast
discovery ${DISCOVERY_RUNS} times, then rpcutil#inventory round trips: <calls>/${SEQUENTIAL_SHARE} one after another, and
<calls> (default 4000) at each of ${CONCURRENCY.join(", ")} in flight. Writes <dir>/wire.json and
<dir>/wire.md (default reports/).
`;

interface Options {
  nodes: number;
  calls: number;
  reportDir: string;
}

function options(): Options | undefined {
  const values = parsedOptions("bench:wire", { nodes: { type: "string" }, calls: { type: "string" }, "report-dir": { type: "string" }, help: { type: "boolean" } });
  if (values.help) return undefined;
  const whole = (name: string, text: string | undefined, fallback: number, least: number) => wholeNumber("bench:wire", name, text, fallback, least);
  return {
    nodes: values.nodes === undefined ? whole("WIRE_NODES", process.env.WIRE_NODES, 2_000, 1) : whole("--nodes", values.nodes, 2_000, 1),
    // At least one sequential call.
    calls: whole("--calls", values.calls, 4_000, SEQUENTIAL_SHARE),
    reportDir: reportDirOf(values["report-dir"]),
  };
}

interface Report {
  generatedAt: string;
  machine: { cpus: number; model: string; node: string };
  loadAverage1m: { start: number; end: number };
  nodes: number;
  fleetStartMs: number;
  discovery: { runs: Array<{ ms: number; found: number }>; medianMs: number; note: string };
  inventory: {
    sequential: RoundTrips;
    concurrent: Array<{ inFlight: number } & RoundTrips>;
  };
}

async function measureDiscovery(nc: NatsConnection): Promise<Report["discovery"]> {
  const discoverer = new BroadcastDiscoverer(nc, client);
  const runs: Array<{ ms: number; found: number }> = [];
  for (let run = 0; run < DISCOVERY_RUNS; run++) {
    const started = performance.now();
    const result = await discoverer.discoverWithStats();
    runs.push({ ms: performance.now() - started, found: result.identities.length });
  }
  return { runs, medianMs: median(runs.map((run) => run.ms)) ?? NaN, note: "includes the 300 ms quiet window after the last reply" };
}

/**
 * Round trips of rpcutil#inventory across the fleet: `calls`/8 in turn, then `calls` at each
 * concurrency level; in every row a failed call (its 4 s timeout) is counted and the loop goes on.
 */
async function measureInventory(nc: NatsConnection, identities: readonly string[], calls: number): Promise<Report["inventory"]> {
  const rpc = new NatsChoriaRpc(nc, client);
  const inventory = (index: number) =>
    rpc.call({ identity: identities[index % identities.length] as string, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 4_000 });

  const sequential = await roundTrips(inventory, Math.floor(calls / SEQUENTIAL_SHARE), 1);
  const concurrent: Report["inventory"]["concurrent"] = [];
  for (const inFlight of CONCURRENCY) concurrent.push({ inFlight, ...(await roundTrips(inventory, calls, inFlight)) });
  return { sequential, concurrent };
}

async function measure(chosen: Options): Promise<Report> {
  const loadStart = loadavg()[0] ?? 0;
  const nats = await startNats();
  try {
    const fleetStarted = performance.now();
    const fleet = await startFleet({ natsUrl: nats.url, count: chosen.nodes, token: "bench-provisioning-token", recordDiscovery: false });
    const fleetStartMs = performance.now() - fleetStarted;
    try {
      const nc = await connect({ servers: nats.url, name: "wire-bench" });
      try {
        const discovery = await measureDiscovery(nc);
        const inventory = await measureInventory(nc, fleet.identities, chosen.calls);
        return {
          generatedAt: new Date().toISOString(),
          machine: { cpus: cpus().length, model: cpus()[0]?.model ?? "unknown", node: process.version },
          loadAverage1m: { start: round2(loadStart), end: round2(loadavg()[0] ?? 0) },
          nodes: chosen.nodes,
          fleetStartMs,
          discovery,
          inventory,
        };
      } finally {
        await nc.close();
      }
    } finally {
      await fleet.stop();
    }
  } finally {
    await nats.stop();
  }
}

async function main(): Promise<void> {
  const chosen = options();
  if (!chosen) {
    process.stdout.write(USAGE);
    return;
  }
  const report = await measure(chosen);
  const text = markdown(report);
  await mkdir(chosen.reportDir, { recursive: true });
  await writeFile(join(chosen.reportDir, "wire.json"), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(chosen.reportDir, "wire.md"), text);
  process.stdout.write(`${text}\nwrote ${join(chosen.reportDir, "wire.json")} and wire.md\n`);
}

function markdown(report: Report): string {
  const lines = [
    "# Wire benchmark",
    "",
    `Generated ${report.generatedAt} by \`npm run bench:wire\` on ${report.machine.cpus} CPU(s) (${report.machine.model}), Node ${report.machine.node}; 1-minute load ${report.loadAverage1m.start} at the start, ${report.loadAverage1m.end} at the end.`,
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
    `| sequential | ${report.inventory.sequential.calls} | ${report.inventory.sequential.perSecond.toFixed(0)} | ${report.inventory.sequential.failures} |`,
    ...report.inventory.concurrent.map((level) => `| ${level.inFlight} in flight | ${level.calls} | ${level.perSecond.toFixed(0)} | ${level.failures} |`),
    "",
  ];
  return lines.join("\n");
}

runBenchmark("wire benchmark", main);
