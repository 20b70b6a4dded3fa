/**
 * bench/peer.ts's report: what reports/peer.json holds and how reports/peer.md is written from it
 * (so `--markdown-only` rewrites the markdown from a recorded report).
 */
import type { ProfileEntry } from "./measure";
import type { RealFleetReport } from "./peer-realfleet";
import { realFleetMarkdown } from "./peer-realfleet";
import type { FleetSummary, HelperKind, MedianRatio, OursConfig, Pair, Side } from "./peer-summary";
import type { Percentiles } from "./peer-timeline";
import type { StageBreakdown } from "./stages";

/**
 * How the committed report's Go binary was obtained (a fact about that run, not a figure: re-check
 * when re-measuring). Shown when the binary did not come from scripts/peers/build-provisioner.sh.
 */
const RUN_NOTES =
  'On the machine that made the committed report the Go module proxy answered 403 "This module version is not available" for github.com/choria-io/provisioner at every version asked (the pinned pseudo-version, v0.16.0, latest), so scripts/peers/build-provisioner.sh stopped there; the binary was built outside the repository from the source of the pinned commit with the script\'s `-ldflags`, its dependencies (go-choria v0.30.0 and the rest of its go.sum) from the module proxy.';
/** What scripts/peers/build-provisioner.sh pins. */
const PROVISIONER_PIN = "v0.16.1-0.20260516145817-aca2b6263842 (commit aca2b62)";

export interface RunResult {
  side: Side;
  fleet: string;
  nodes: number;
  setting: string;
  config: OursConfig;
  helper: HelperKind;
  /** `<helper>/<config>/<slot>.<attempt>` of the pair the run belongs to; absent for the profiled and no-cliff runs. */
  pair?: string;
  complete: boolean;
  timeout_s: number;
  /** Nodes that acknowledged their restart (the same as `provisioned`, named as the acceptance reads it). */
  restarted: number;
  provisioned: number;
  refused_requests: number;
  /** Ours: AWS SDK requests that exceeded their timeout and were retried (DynamoDB Local or fauxqs slow to answer). */
  sdk_slow_requests?: number;
  last_refusal?: string;
  seconds_first_admission_to_last_restart: number;
  hosts_per_min: number;
  admission_to_restart_ms: Percentiles;
  /** From the first discovery broadcast, which found the host (a startup event: the fleet's start). */
  discovery_to_restart_ms: Percentiles;
  /** First admissions per second from the first discovery broadcast (or the first admission). */
  admission_timeline: number[];
  longest_admission_gap_s: number;
  /** The 1-minute load when the provisioner was set to work. */
  start_load: number;
  /** CPU steal % of all CPU time over the run (/proc/stat). */
  steal_pct: number;
  /** benchmark_process: this process, which also hosts fauxqs for ours' runs (and reads Go's log lines for Go's). */
  cpu_s: { provisioner: number; helpers_reaped: number; fleet: number; nats_server: number; dynamodb_local: number; benchmark_process: number };
  cpu_ms_per_host: number;
  helper_cpu_ms_per_host: number;
  peak_memory_mb: number;
  /** 1-minute load average: at the run's start, the highest sample through it (every 5 s) and at its end. */
  load_average_1m: { start: number; max: number; after: number; samples: number[] };
  profile_top?: ProfileEntry[];
  /** Ours: where each host's time went (bench/stages.ts). */
  stages?: StageBreakdown;
}

/** `--no-cliff`: ours alone on one fleet, with a delay on every DynamoDB request. */
export interface NoCliff {
  generated: string;
  nodes: number;
  store_delay_ms: number;
  /** From the first admission to the last host's first admission. */
  admission_seconds: number;
  longest_admission_gap_s: number;
  every_host_restarted: boolean;
  restarted: number;
  hosts_per_min: number;
  start_load: number;
  steal_pct: number;
  admission_timeline: number[];
}

export interface Report {
  generated: string;
  wall_seconds: number;
  cpus: number;
  cpu_model: string;
  node: string;
  go_provisioner: { binary: string | null; unavailable_reason?: string };
  settings: {
    pairs: number;
    go_workers: number;
    ours_default: string;
    ours_tuned: string | null;
    max_start_load: number;
    max_steal_pct: number;
    load_wait_s: number;
    warm_up_nodes: number;
    store_delay_ms: number;
    /** Both sides on CPU 0, DynamoDB Local, fauxqs and the benchmark on CPU 1 (--stand-ins-apart); absent in reports from before it. */
    stand_ins_apart?: boolean;
  };
  real_fleet: RealFleetReport;
  fleets: FleetSummary[];
  runs: RunResult[];
  no_cliff?: NoCliff;
}

export function markdown(report: Report): string {
  const lines = [...resultSection(report), ...pairsSection(report.fleets), ...noCliffSection(report.no_cliff), ...realFleetMarkdown(report.real_fleet, report.cpus)];
  lines.push(...methodSection(report), ...everyRunTable(report.runs), ...cpuPerProcessTable(report.runs));
  lines.push("", "## Findings", "", ...findings(report));
  lines.push(...profileSection(report.runs));
  return `${lines.join("\n")}\n`;
}

/** The throughput goals: ours' hosts/min over Go's, median of the default-configuration pairs, per helper. */
const GOALS = { bash: 1.3, compiled: 2 } as const;

const figure = (value: number | null | undefined) => (value === null || value === undefined ? "-" : String(value));
const spread = (m: MedianRatio | undefined) => (m === undefined || m.reason === "not run" ? "not run" : m.median === null ? `- (${m.counted} counted)` : `**${m.median}** (${m.min}-${m.max}, ${m.counted} pairs)`);

/** The medians per fleet, why one is missing, and which Go binary ran. */
function resultSection(report: Report): string[] {
  const lines = ["# Side by side: the Go provisioner and this project", ""];
  lines.push(
    `Generated ${report.generated} by \`npm run bench:peer\` on ${report.cpus} CPU(s) (${report.cpu_model})${report.settings.stand_ins_apart ? ", both sides on CPU 0 and the stand-ins for AWS's services on CPU 1" : ""}, Node ${report.node}; the whole benchmark took ${report.wall_seconds.toFixed(0)} s.`,
    "The ratios are medians of alternated pairs (method below); absolute rates depend on the machine.",
    "",
    "## Result",
    "",
    `| fleet | median ratio, bash + jq (min-max, goal >= ${GOALS.bash}) | median ratio, compiled (goal >= ${GOALS.compiled}) | tuned, bash + jq | tuned, compiled | ours' p99 from discovery (compiled, default) | below Go's every pair | every host restarted | highest start load | slots left refused |`,
    "|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const f of report.fleets) {
    lines.push(
      `| ${f.fleet} | ${spread(f.spread.bash)} | ${spread(f.spread.compiled)} | ${spread(f.tuned_spread?.bash)} | ${spread(f.tuned_spread?.compiled)} | ${figure(f.p99_from_discovery_ms)} ms | ${f.p99_below_go_every_pair ? "yes" : "no"} | ${f.every_host_restarted ? "yes" : "no"} | ${figure(f.max_start_load)} | ${f.slots_left_refused} |`,
    );
  }
  lines.push("");
  for (const f of report.fleets) {
    const reasons = [["bash + jq", f.spread.bash], ["compiled", f.spread.compiled], ["tuned bash + jq", f.tuned_spread?.bash], ["tuned compiled", f.tuned_spread?.compiled]] as const;
    for (const [name, m] of reasons) if (m?.reason && m.reason !== "not run") lines.push(`- **${f.fleet}, no ${name} median:** ${m.reason}`);
  }
  if (report.fleets.length === 0) lines.push("No pairs were run.");
  lines.push("");
  if (report.go_provisioner.unavailable_reason) lines.push(`**The Go provisioner was not run:** ${report.go_provisioner.unavailable_reason}`, "");
  const goBinary = report.go_provisioner.binary;
  if (goBinary) {
    const fromScript = goBinary.includes("/choria-peers/bin/") || goBinary.startsWith(process.env.CHORIA_PEERS_DIR ?? "\0");
    lines.push(
      fromScript
        ? `**Go binary:** \`${goBinary}\`, built by scripts/peers/build-provisioner.sh (choria-io/provisioner ${PROVISIONER_PIN} from the Go module proxy, or from a clone at that commit where the proxy refuses it).`
        : `**Go binary:** \`${goBinary}\`, given with \`CHORIA_PROVISIONER_BIN\`. ${RUN_NOTES}`,
      "",
    );
  }
  return lines;
}

function pairRow(p: Pair): string {
  const status = p.counted ? "counted" : p.refused ? `refused: ${p.refused}` : `not counted: ${p.not_counted ?? "no Go rate"}`;
  const below = p.ours_p99_discovery_below_go === null ? "-" : p.ours_p99_discovery_below_go ? "yes" : "no";
  return `| ${p.helper} | ${p.config} | ${p.slot}.${p.attempt} | ${p.order} | ${p.go_hosts_per_min} | ${p.ours_hosts_per_min} | ${figure(p.ratio)} | ${p.start_load} | ${p.steal_pct} | ${figure(p.go_p99_admission_ms)} / ${figure(p.ours_p99_admission_ms)} | ${figure(p.go_p99_discovery_ms)} / ${figure(p.ours_p99_discovery_ms)} | ${below} | ${status} |`;
}

function pairsSection(fleets: readonly FleetSummary[]): string[] {
  const lines: string[] = [];
  for (const f of fleets) {
    lines.push(
      `## Pairs, ${f.fleet}`,
      "",
      "| helper | config | slot.attempt | order | Go hosts/min | ours hosts/min | ratio | start load | steal % | p99 admission -> restart ms, Go / ours | p99 discovery -> restart ms, Go / ours | ours' below | |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
      ...f.pairs.map(pairRow),
      "",
    );
  }
  return lines;
}

function noCliffSection(noCliff: NoCliff | undefined): string[] {
  if (!noCliff) return [];
  return [
    "## No cliff: admission past a slow store",
    "",
    `${noCliff.generated}: ours alone (default config, compiled helper) on ${noCliff.nodes} nodes with ${noCliff.store_delay_ms} ms added to every DynamoDB request (\`--no-cliff ${noCliff.nodes} --store-delay-ms ${noCliff.store_delay_ms}\`).`,
    `Admission took ${noCliff.admission_seconds} s; the longest gap between admissions while discovered hosts waited was **${noCliff.longest_admission_gap_s} s**; ${noCliff.restarted}/${noCliff.nodes} restarted (${noCliff.every_host_restarted ? "every host" : "NOT every host"}), ${noCliff.hosts_per_min} hosts/min; load ${noCliff.start_load} at start, steal ${noCliff.steal_pct} %.`,
    "",
    `Admissions per second from the first discovery: ${noCliff.admission_timeline.join(" ")}`,
    "",
  ];
}

function methodSection(report: Report): string[] {
  const s = report.settings;
  return [
    "## How it was measured",
    "",
    `- **Pairs**: per fleet size, helper and config, ${s.pairs} pair(s) of one Go run and one ours run back to back, alternated (pair 1 Go first, pair 2 ours first, ...),`,
    "  each run on its own nats-server and fresh fleet. A pair's ratio is ours' hosts/min over Go's; a fleet's figure is the median over its",
    "  counted pairs, given from 3, with the spread (min-max).",
    `- **Gates**: before each run the benchmark waits (up to ${s.load_wait_s} s) for the 1-minute load to fall below ${s.max_start_load}. A pair is refused`,
    `  when a run started above ${s.max_start_load} or the CPU steal over a run (/proc/stat: delta steal / delta total) passed ${s.max_steal_pct} %, and is run`,
    "  again (at most 2 more attempts per slot; a slot refused every time is left refused). A pair where a side did not restart every node is",
    "  not counted. Refused and uncounted pairs are listed with the reason.",
    s.stand_ins_apart
      ? "- **CPUs**: both sides' processes (provisioner, helpers, fleet, nats-server) on CPU 0; DynamoDB Local, fauxqs and the benchmark on CPU 1 (`--stand-ins-apart`, taskset): the stand-ins for AWS's services off the provisioners' core, as on AWS."
      : `- **CPUs**: every process on any of the ${report.cpus} CPUs, the stand-ins for AWS's services (DynamoDB Local, fauxqs) included.`,
    `- **Configs**: "default" is ours as shipped: provision concurrency ${s.ours_default.split(" x ")[0]} (serverless.yml \`provisionMaxConcurrency\`), \`workers\` ${s.ours_default.split(" x ")[1]}, no configuration`,
    `  overrides (so discovery admits new names at the product's default pace). ${s.ours_tuned ? `"tuned" is ${s.ours_tuned}: provision concurrency (provision invocations at once) ${s.ours_default.split(" x ")[0]} -> ${s.ours_tuned.split(" x ")[0]} and \`workers\` (hosts one invocation works on at once) ${s.ours_default.split(" x ")[1]} -> ${s.ours_tuned.split(" x ")[1]}; nothing else changes.` : '"tuned" was not run (`--tuned CxW`).'}`,
    `- **Go**: \`choria-provisioner run\` with \`workers: ${s.go_workers}\`, \`leader_election: false\`, \`interval: 1m\`, \`loglevel: info\` to a pipe the benchmark reads.`,
    "- **Ours**: bench/peer-ours.ts, the real handlers under the emulated Lambda runtime (schedules, SQS pollers long-polling 20 s, AWS timings),",
    "  bundled by esbuild with the functions' options and run by plain node (bench/ours-bundle.ts), as Lambda runs the deployed bundle;",
    "  logging with the production logger (Powertools JSON at info) to stdout, which the benchmark drains from a pipe as Lambda's runtime does.",
    `  DynamoDB Local and fauxqs run in other processes${s.store_delay_ms > 0 ? `; every DynamoDB request went through a proxy in the benchmark's process adding ${s.store_delay_ms} ms` : ""}.`,
    `- **Warm-up**: ${s.warm_up_nodes > 0 ? `one unreported ${s.warm_up_nodes}-node run of each side (Go, then ours) before the first measured run` : "none"}.`,
    "- **hosts/min**: restarted hosts / time from the first admission to the last restart acknowledged at a node.",
    "- **admission -> restart**: per host, from its last admission to the node recording `restart` (Go: its `Adding <identity> to the work queue`",
    "  line; ours: the host-work message's `admittedAt`). Not like for like: ours paces admission, so its figure leaves out the wait before it.",
    "- **discovery -> restart**: per host, from the first discovery broadcast the fleet received (the one that found the host: every node",
    "  answers every broadcast, so a host left waiting past a discovery is still measured from it) to its restart, the same on both sides;",
    "  a host first admitted from its startup event (ours' host-work source `lifecycle`) is measured from the fleet's start.",
    "- **longest admission gap**: the longest time between consecutive admissions while some discovered host was not yet admitted.",
    "- **CPU ms/host**: the provisioner process's utime + stime (/proc/<pid>/stat) over the run, over restarted hosts (ours with its helper",
    "  launcher); reaped helper processes apart. Not counted: fleet, nats-server, DynamoDB Local, fauxqs (in peer.json). **peak memory**: VmHWM.",
    "- **bounds**: each run stops at max(180 s, 120 s + 0.1 s per node) (`--timeout`); a run stopped there is marked incomplete.",
    "",
  ];
}

function everyRunTable(runs: readonly RunResult[]): string[] {
  const lines = [
    "## Every run",
    "",
    "| side | fleet | helper | config | pair | setting | restarted | hosts/min | p99 admission ms | p99 discovery ms | longest admission gap s | CPU ms/host | helpers ms/host | VmHWM MB | refused | load start / max / after | steal % |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    lines.push(
      `| ${r.side}${r.profile_top ? " (profiled)" : ""} | ${r.fleet} | ${r.helper} | ${r.config} | ${r.pair ?? "-"} | ${r.setting} | ${r.provisioned}${r.complete ? "" : ` (stopped at ${r.timeout_s} s)`} | ${r.hosts_per_min} | ${figure(r.admission_to_restart_ms.p99)} | ${figure(r.discovery_to_restart_ms.p99)} | ${r.longest_admission_gap_s} | ${r.cpu_ms_per_host} | ${r.helper_cpu_ms_per_host} | ${r.peak_memory_mb} | ${r.refused_requests} | ${r.load_average_1m.start} / ${r.load_average_1m.max} / ${r.load_average_1m.after} | ${r.steal_pct} |`,
    );
  }
  return lines;
}

function cpuPerProcessTable(runs: readonly RunResult[]): string[] {
  const lines = [
    "",
    "## CPU per restarted host in every process (ms)",
    "",
    "What the whole run cost on this machine: only the provisioner column is the provisioner's figure.",
    "`benchmark` is the benchmark's own process, which hosts fauxqs (and the store-delay proxy) during ours' runs and reads Go's log lines during Go's.",
    "",
    "| side | fleet | helper | config | pair | provisioner | helpers | fleet | nats-server | DynamoDB Local | benchmark (fauxqs) | total |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    const per = (seconds: number) => (r.provisioned === 0 ? undefined : Math.round((seconds / r.provisioned) * 10_000) / 10);
    const parts = cpuParts(r);
    const total = per(wholeRunCpu(r));
    lines.push(
      `| ${r.side}${r.profile_top ? " (profiled)" : ""} | ${r.fleet} | ${r.helper} | ${r.config} | ${r.pair ?? "-"} | ${parts.map((value, i) => (i === 4 && r.side === "go" ? "-" : (per(value) ?? "-"))).join(" | ")} | ${total ?? "-"} |`,
    );
  }
  return lines;
}

/** A run's CPU seconds in every process: provisioner, helpers, fleet, nats-server, DynamoDB Local (ours), the benchmark. */
function cpuParts(r: RunResult): number[] {
  const c = r.cpu_s;
  return [c.provisioner, c.helpers_reaped, c.fleet, c.nats_server, r.side === "ours" ? c.dynamodb_local : 0, c.benchmark_process];
}

function profileSection(runs: readonly RunResult[]): string[] {
  const profiled = runs.find((r) => r.profile_top);
  if (!profiled?.profile_top) return [];
  const lines = ["", `## Profile of ours (${profiled.nodes} nodes, ${profiled.setting}, ${profiled.helper} helper)`, ""];
  lines.push("`node --cpu-prof` of the bench/peer-ours.ts process for the whole run (start-up included), top self time:", "");
  lines.push("| function | location | self ms | % |", "|---|---|---|---|");
  for (const entry of profiled.profile_top) lines.push(`| ${entry.function} | ${entry.location} | ${entry.self_ms} | ${entry.self_percent} |`);
  return lines;
}

const perHost = (r: RunResult, seconds: number) => (r.provisioned > 0 ? Math.round((seconds / r.provisioned) * 10_000) / 10 : 0);
const mean = (values: number[]) => (values.length ? Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10 : 0);
const round = (value: number, scale = 10) => Math.round(value * scale) / scale;
/** The mean over `runs` of the CPU ms per host that `seconds` picks from a run. */
const meanPerHost = (runs: RunResult[], seconds: (r: RunResult) => number) => mean(runs.map((r) => perHost(r, seconds(r))));
/** A run's CPU seconds, every process. */
const wholeRunCpu = (r: RunResult) => cpuParts(r).reduce((sum, value) => sum + value, 0);

/**
 * What the figures say, computed from the runs (so `--markdown-only` rewrites them from
 * peer.json); the prose names the mechanisms, read from both code bases.
 */
function findings(report: Report): string[] {
  const measured = report.runs.filter((r) => r.pair !== undefined && r.complete);
  const goRuns = measured.filter((r) => r.side === "go");
  const oursRuns = measured.filter((r) => r.side === "ours" && r.config === "default");
  if (goRuns.length === 0 || oursRuns.length === 0) return ["No complete run of both sides; nothing to compare."];
  const goals = report.fleets.map((f) => {
    const text = (ratio: number | null, goal: number, helper: string) =>
      ratio === null ? `no ${helper} median (see above)` : `median ${ratio}x the hosts/min with the ${helper} helper (${ratio >= goal ? "goal met" : `goal of ${goal}x not met`})`;
    return `${f.fleet}: ${text(f.median_ratio_hosts_per_min, GOALS.bash, "bash + jq")}, ${text(f.median_ratio_hosts_per_min_compiled, GOALS.compiled, "compiled")}`;
  });
  return [`**Goals.** ${goals.join("; ")}.`, "", ...goalGapFinding(report, goRuns, oursRuns), ...cpuFinding(report, goRuns, oursRuns), ...sidesFindings(report, goRuns, oursRuns)];
}

/**
 * What an unmet goal would take. Where both sides keep the machine's cores busy, hosts/min is the
 * cores over the whole run's CPU per host, so a ratio of rates is close to the inverse ratio of
 * those CPU costs: the goal names a CPU cost per host for ours. The helper and the fleet are the
 * same programs on both sides and ours already asks far less of the broker than Go does, so what
 * is left of that cost is the room for the provisioner and the stand-ins for AWS's services, which
 * on AWS are not on the box. With the stand-ins apart, the cores are not shared alike (Go's run
 * leaves CPU 1 idle), so the premise does not hold and nothing is said.
 */
function goalGapFinding(report: Report, goRuns: RunResult[], oursRuns: RunResult[]): string[] {
  if (report.settings.stand_ins_apart) return [];
  const gaps: string[] = [];
  for (const f of report.fleets) {
    for (const [helper, ratio, goal] of [["bash", f.median_ratio_hosts_per_min, GOALS.bash], ["compiled", f.median_ratio_hosts_per_min_compiled, GOALS.compiled]] as const) {
      const runsOf = (runs: RunResult[]) => runs.filter((r) => r.fleet === f.fleet && r.helper === helper);
      const [go, ours] = [runsOf(goRuns), runsOf(oursRuns)];
      if (ratio === null || ratio >= goal || go.length === 0 || ours.length === 0) continue;
      gaps.push(`${f.fleet}, ${helper === "bash" ? "bash + jq" : "compiled"} helper: ${goalGap(go, ours, goal)}`);
    }
  }
  if (gaps.length === 0) return [];
  return [
    "**What the goals not met would take** (CPU per host of the whole run, every process, mean over the complete default runs; what each of a host's DynamoDB writes costs is in reports/store-writes.md):",
    "",
    ...gaps.map((gap) => `- ${gap}.`),
    "",
  ];
}

/** One goal's gap: the CPU per host ours would need, and how much of it the work both sides share leaves to the provisioner and the stand-ins. */
function goalGap(go: RunResult[], ours: RunResult[], goal: number): string {
  const coresBusy = (runs: RunResult[]) => mean(runs.map((r) => (wholeRunCpu(r) / r.provisioned) * (r.hosts_per_min / 60)));
  const [goCost, oursCost] = [meanPerHost(go, wholeRunCpu), meanPerHost(ours, wholeRunCpu)];
  const needed = round(goCost / goal);
  const shared = meanPerHost(ours, (r) => r.cpu_s.helpers_reaped + r.cpu_s.fleet + r.cpu_s.nats_server);
  const [provisioner, dynamo, bench] = [meanPerHost(ours, (r) => r.cpu_s.provisioner), meanPerHost(ours, (r) => r.cpu_s.dynamodb_local), meanPerHost(ours, (r) => r.cpu_s.benchmark_process)];
  const withoutDynamo = round(oursCost - dynamo);
  return (
    `Go ${goCost} ms per host (${coresBusy(go)} cores busy), ours ${oursCost} (${coresBusy(ours)} cores); ${goal}x needs ours at ${needed} or less, ${round(oursCost - needed)} ms less per host. ` +
    `Ours' helper, fleet and nats-server take ${shared} of it, which leaves ${round(needed - shared)} for the provisioner and the stand-ins for AWS, against ${round(provisioner + dynamo + bench)} today (provisioner ${provisioner}, DynamoDB Local ${dynamo}, fauxqs and the benchmark ${bench}); ` +
    `without DynamoDB Local on the box (as on AWS) ours would cost ${withoutDynamo}, Go's CPU per host over ${round(goCost / withoutDynamo, 100)}`
  );
}

/** CPU per host of a whole run, every process, over the first fleet's complete default runs. */
function cpuFinding(report: Report, goAll: RunResult[], oursAll: RunResult[]): string[] {
  const fleet = report.fleets[0]?.fleet;
  const goRuns = goAll.filter((r) => r.fleet === fleet);
  const oursRuns = oursAll.filter((r) => r.fleet === fleet);
  if (goRuns.length === 0 || oursRuns.length === 0) return [];
  const go = { own: mean(goRuns.map((r) => r.cpu_ms_per_host)), helper: mean(goRuns.map((r) => r.helper_cpu_ms_per_host)), fleet: meanPerHost(goRuns, (r) => r.cpu_s.fleet), nats: meanPerHost(goRuns, (r) => r.cpu_s.nats_server) };
  const ours = {
    own: mean(oursRuns.map((r) => r.cpu_ms_per_host)),
    helper: mean(oursRuns.map((r) => r.helper_cpu_ms_per_host)),
    fleet: meanPerHost(oursRuns, (r) => r.cpu_s.fleet),
    nats: meanPerHost(oursRuns, (r) => r.cpu_s.nats_server),
    dynamo: meanPerHost(oursRuns, (r) => r.cpu_s.dynamodb_local),
    bench: meanPerHost(oursRuns, (r) => r.cpu_s.benchmark_process),
  };
  const total = (parts: Record<string, number>) => round(Object.values(parts).reduce((a, b) => a + b, 0));
  return [
    `**CPU per host of a whole run, every process** (mean over the complete ${fleet} runs of the pairs, ours at its default config, every helper run). Go's run costs ${total(go)} ms per host (provisioner ${go.own}, helper ${go.helper}, fleet ${go.fleet}, nats-server ${go.nats}); ours costs ${total(ours)} (provisioner ${ours.own}, helper ${ours.helper}, fleet ${ours.fleet}, nats-server ${ours.nats}, DynamoDB Local ${ours.dynamo}, fauxqs and the benchmark ${ours.bench}). Everything shares ${report.cpus} cores here; on AWS each Lambda container brings its own CPU and DynamoDB / SQS are not on the box.`,
    "",
  ];
}

function sidesFindings(report: Report, goRuns: RunResult[], oursRuns: RunResult[]): string[] {
  const fleet = report.fleets[0]?.fleet;
  const natsGo = mean(goRuns.filter((r) => r.fleet === fleet).map((r) => perHost(r, r.cpu_s.nats_server)));
  const natsOurs = mean(oursRuns.filter((r) => r.fleet === fleet).map((r) => perHost(r, r.cpu_s.nats_server)));
  const gaps = (runs: RunResult[]) => Math.max(...runs.map((r) => r.longest_admission_gap_s));
  const refused = report.runs.reduce((sum, r) => sum + r.refused_requests, 0);
  return [
    `**Go.** Every RPC opens its own NATS connection (go-choria's client connects per request unless given one), so nats-server works ${natsGo} ms per host for Go against ${natsOurs} for ours, which keeps one connection per invocation container. Memory: VmHWM up to ${Math.max(...goRuns.map((r) => r.peak_memory_mb))} MB against ${Math.max(...oursRuns.map((r) => r.peak_memory_mb))} MB for ours. It admits every discovered host at once (longest admission gap ${gaps(goRuns)} s), so its admission-to-restart is the queue wait; a host that waited more than 2 x \`interval\` is dropped until the next discovery.`,
    "",
    `**Ours.** Discovery admits in chunks (each a registry write and one SendMessageBatch), paced to a few seconds of the host-work backlog (\`discovery_backlog\`), so admission-to-restart stays short while discovery-to-restart carries the wait before admission (longest admission gap ${gaps(oursRuns)} s over the default runs).`,
    "",
    `**The simulator and the real Go provisioner.** Over every run the simulated nodes refused or dropped ${refused} requests. Not exercised on the simulator: a TLS broker (\`choria_insecure: true\` makes the Go daemon dial plain NATS) and protocol v2 signed requests; ${report.real_fleet.run ? "the real fleet's section has both sides over TLS on go-choria's broker (protocol v1)" : "the real fleet, which has both sides over TLS, was not run"}.`,
  ];
}
