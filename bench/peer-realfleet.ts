/**
 * bench:peer on the real go-choria fleet: the Go provisioner and this project, each in its own run
 * of `scripts/realfleet.ts` (real servers in provisioning mode, go-choria's own broker for both
 * networks, TLS, the provisioning account and broker password), alternated so load from other work
 * falls on both. A run's figure is the time from the provisioner's start to the last node's startup
 * event on the target broker, as the harness prints it, and the site's admin client's ping and
 * authorized `rpcutil inventory` replies after it. Protocol v1 (jwt + pki): the Go daemon's real-fleet
 * wiring (goProvisionerFiles) is protocol v1 only.
 */
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { createInterface } from "node:readline";
import { round2 } from "./measure";
import type { Side } from "./peer-summary";

export interface RealFleetRun {
  side: Side;
  nodes: number;
  /** Go `workers`, or ours' provision concurrency x workers. */
  setting: string;
  provisioned: number;
  /** From the provisioner's start to the last arrival; undefined when the harness printed no figure. */
  seconds: number | undefined;
  pings: number;
  authorized: number;
  exit_code: number | null;
  /** The 1-minute load average at the run's start and the highest seen through it. */
  load_average_1m: { start: number; max: number };
  /** Why the run is not a complete one, when it is not. */
  problem?: string;
}

export interface RealFleetSummary {
  nodes: number;
  go_seconds: number | null;
  ours_seconds: number | null;
  /** Go's time over ours' (above 1: ours provisioned the fleet sooner); null with `not_comparable`. */
  ratio_time: number | null;
  max_start_load: number;
  not_comparable?: string[];
}

export interface RealFleetReport {
  run: boolean;
  reason?: string;
  runs?: RealFleetRun[];
  summary?: RealFleetSummary;
}

/** What one `scripts/realfleet.ts` run printed, read from its summary lines. */
export function readRealFleetOutput(output: string, nodes: number): Pick<RealFleetRun, "provisioned" | "seconds" | "pings" | "authorized"> & { problem?: string } {
  const problems: string[] = [];
  const provisioned = /^(\d+)\/(\d+) provisioned in ([\d.]+) s from the /m.exec(output);
  if (!provisioned) problems.push("the harness printed no 'provisioned in' line");
  const admin = /: (\d+)\/\d+ ping replies, (\d+)\/\d+ authorized rpcutil inventory replies$/m.exec(output);
  if (!admin) problems.push("the harness printed no admin ping and inventory line");
  const count = Number(provisioned?.[1] ?? 0);
  if (provisioned && count < nodes) problems.push(`${count}/${nodes} nodes provisioned`);
  const pings = Number(admin?.[1] ?? 0);
  const authorized = Number(admin?.[2] ?? 0);
  if (admin && (pings < nodes || authorized < nodes)) problems.push(`admin: ${pings}/${nodes} pings, ${authorized}/${nodes} authorized inventories`);
  return {
    provisioned: count,
    seconds: provisioned ? Number(provisioned[3]) : undefined,
    pings,
    authorized,
    ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
  };
}

const complete = (run: RealFleetRun) => run.problem === undefined && run.exit_code === 0 && run.seconds !== undefined;

/**
 * Each side's fastest complete run, and their ratio only where both exist and both started with the
 * 1-minute load at or below the core count (a ratio from a busy machine describes the machine).
 */
export function summariseRealFleet(runs: RealFleetRun[], cores: number): RealFleetSummary {
  const fastest = (side: Side) =>
    runs
      .filter((run) => run.side === side && complete(run))
      .sort((a, b) => (a.seconds ?? Infinity) - (b.seconds ?? Infinity))[0];
  const go = fastest("go");
  const ours = fastest("ours");
  const notComparable: string[] = [];
  if (!go) notComparable.push("no complete run of the Go provisioner");
  if (!ours) notComparable.push("no complete run of ours");
  for (const run of [go, ours]) {
    if (run && run.load_average_1m.start > cores) notComparable.push(`${run.side === "go" ? "Go's" : "ours'"} fastest run started at load ${run.load_average_1m.start}, above the ${cores} cores`);
  }
  const ratio = notComparable.length === 0 && go?.seconds && ours?.seconds ? Math.round((go.seconds / ours.seconds) * 100) / 100 : null;
  return {
    nodes: runs[0]?.nodes ?? 0,
    go_seconds: go?.seconds ?? null,
    ours_seconds: ours?.seconds ?? null,
    ratio_time: ratio,
    max_start_load: Math.max(0, ...[go, ours].filter((run) => run !== undefined).map((run) => run.load_average_1m.start)),
    ...(notComparable.length > 0 ? { not_comparable: notComparable } : {}),
  };
}

export interface RealFleetRunSpec {
  side: Side;
  nodes: number;
  goBin?: string;
  goWorkers: number;
  ours: { maxConcurrency: number; workers: number };
  timeoutS: number;
}


/** One run of scripts/realfleet.ts for one side; its output goes to ours with a prefix. */
export async function runRealFleet(repoRoot: string, spec: RealFleetRunSpec): Promise<RealFleetRun> {
  const setting = spec.side === "go" ? `workers ${spec.goWorkers}` : `${spec.ours.maxConcurrency} x ${spec.ours.workers}`;
  const args = ["--import", "tsx", "scripts/realfleet.ts", "--protocol", "1", "--nodes", String(spec.nodes), "--timeout", String(spec.timeoutS)];
  if (spec.side === "go") {
    if (!spec.goBin) throw new Error("runRealFleet: the Go side needs the provisioner binary");
    args.push("--go-provisioner", spec.goBin, "--go-workers", String(spec.goWorkers));
  } else {
    args.push("--ours", `${spec.ours.maxConcurrency}x${spec.ours.workers}`);
  }
  const start = loadavg()[0] ?? 0;
  let max = start;
  const sampler = setInterval(() => (max = Math.max(max, loadavg()[0] ?? 0)), 5_000);
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  // Whole lines, so the side's prefix never lands inside a line split across two reads.
  const relay = (line: string) => {
    output += `${line}\n`;
    process.stdout.write(`  [${spec.side}] ${line}\n`);
  };
  createInterface({ input: child.stdout }).on("line", relay);
  createInterface({ input: child.stderr }).on("line", relay);
  const exitCode = await new Promise<number | null>((done) => child.once("close", (code) => done(code)));
  clearInterval(sampler);
  const read = readRealFleetOutput(output, spec.nodes);
  const problems = [read.problem, exitCode === 0 ? undefined : `the harness exited with ${exitCode}`].filter((text) => text !== undefined);
  return {
    side: spec.side,
    nodes: spec.nodes,
    setting,
    provisioned: read.provisioned,
    seconds: read.seconds,
    pings: read.pings,
    authorized: read.authorized,
    exit_code: exitCode,
    load_average_1m: { start: round2(start), max: round2(max) },
    ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
  };
}

/** The report's section on the real fleet. */
export function realFleetMarkdown(report: RealFleetReport, cores: number): string[] {
  if (!report.run || !report.runs || !report.summary) return [`**Real go-choria fleet:** not run: ${report.reason ?? "no reason recorded"}`, ""];
  const s = report.summary;
  const lines = [
    "## Real go-choria fleet",
    "",
    `${s.nodes} go-choria servers per run (\`scripts/realfleet.ts --protocol 1\`, jwt + pki): each in its own namespace, go-choria's own broker for the`,
    "provisioning network (TLS, provisioning account, broker password) and the target network, the real-fleet helper on both sides.",
    "Time is from the provisioner's start (Go: its spawn, which discovers at once; ours: the stack's start, whose first lease round is followed by discovery)",
    "to the last node's startup event on the target broker, so it includes each node's 2 s restart splay and its restart. Runs alternate the sides.",
    "",
    `| Go s to all provisioned | ours s | ratio (Go / ours, above 1: ours sooner) | highest start load |`,
    "|---|---|---|---|",
    `| ${s.go_seconds ?? "-"} | ${s.ours_seconds ?? "-"} | ${s.ratio_time ?? "-"} | ${s.max_start_load} |`,
    "",
  ];
  for (const reason of s.not_comparable ?? []) lines.push(`- **no ratio:** ${reason}`);
  if (s.not_comparable) lines.push("");
  lines.push("| side | nodes | setting | provisioned | s to all provisioned | admin pings / authorized inventories | load start / max | problem |", "|---|---|---|---|---|---|---|---|");
  for (const run of report.runs) {
    lines.push(
      `| ${run.side} | ${run.nodes} | ${run.setting} | ${run.provisioned} | ${run.seconds ?? "-"} | ${run.pings} / ${run.authorized} | ${run.load_average_1m.start}${run.load_average_1m.start > cores ? " (above the cores)" : ""} / ${run.load_average_1m.max} | ${run.problem ?? ""} |`,
    );
  }
  lines.push("");
  return lines;
}
