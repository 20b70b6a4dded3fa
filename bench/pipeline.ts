/**
 * Pipeline benchmark: the whole product on the local stack (discovery + lifecycle events + queue +
 * engine with jwt + ed25519 and an executable helper) against 100, 1,000 and 5,000 simulated nodes,
 * at several provision concurrency levels, plus a failover run with a standby deployment and a
 * CPU-profiled 1,000-node run.
 *
 *   npm run bench                                      writes reports/bench.json and reports/bench.md
 *   npm run bench -- --sizes 100,1000                  (smaller matrix; BENCH_SIZES=100,1000 also works)
 *   npm run bench -- --sizes 100 --only bash-100 --report-dir /tmp/bench   (one run, elsewhere)
 *   npm run bench -- --help                            (the options)
 *
 * Everything except nats-server and DynamoDB Local (and the helper processes) runs in this one
 * process: the simulated fleet, fauxqs, the emulated Lambda runtime and every App.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { Session } from "node:inspector/promises";
import { runLocal, type RunSummary } from "../dev/local/run";
import { dynamoDbSplit } from "../dev/local/request-counter";
import { HELPERS, startLocalStack, type HelperChoice, type LocalStack, type LocalStackOptions } from "../dev/local/stack";
import { childPids, cpuSeconds, percentile, procMemory, procStat, round2, sumStats, summariseProfile, type CpuProfile } from "./measure";
import { parsedOptions, readWholeNumber, readWholeNumbers, recordedJson, reportDirOf, runBenchmark, UsageError, type Reading } from "./command";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const PRICES = {
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecondArm64: 0.0000133334,
  sqsPerMillionRequests: 0.4,
  dynamoDbPerMillionWrites: 0.625,
  dynamoDbPerMillionReads: 0.125,
} as const;

const USAGE = `Usage: npm run bench -- [--sizes <n,n>] [--only <run,...>] [--report-dir <dir>] [--markdown-only]

Runs the whole pipeline on the local stack: a run with the bash helper at each size (default
BENCH_SIZES, else 100,1000,5000); at 1,000 nodes (else the first size) one at each other concurrency
level, one with each other helper and a CPU-profiled one; and a failover run with a standby
deployment. --only keeps the runs named, by their label in the report (bash-100, inline-1000,
failover-300, ...). Writes <dir>/bench.json and <dir>/bench.md (default reports/); --markdown-only
rewrites <dir>/bench.md from <dir>/bench.json and runs nothing.

Settings (environment, defaults in brackets; all are checked before anything starts):
  BENCH_CONCURRENCY [2,5,10]      the concurrency levels of the side runs
  BENCH_DEFAULT_CONCURRENCY [10]  the concurrency of every other run
  BENCH_HELPERS [inline,node]     the other helpers' runs (empty for none)
  BENCH_SKIP_PROFILE, BENCH_SKIP_FAILOVER [false]   true leaves that run out
  BENCH_FAILOVER_NODES [300], BENCH_KILL_AFTER_MS [5000]   the failover run's size and crash time
  BENCH_TIMEOUT_SMALL_S [120], BENCH_TIMEOUT_1000_S [240], BENCH_TIMEOUT_LARGE_S [240],
  BENCH_TIMEOUT_SIDE_S [120], BENCH_TIMEOUT_PROFILE_S [90], BENCH_TIMEOUT_FAILOVER_S [240]
                                  each run's time limit: up to 100, 1,000 and more nodes; the
                                  side, profiled and failover runs
`;

interface Options {
  sizes: number[];
  only: string[] | undefined;
  reportDir: string;
  markdownOnly: boolean;
  settings: Settings;
}

/** What the BENCH_* environment variables set (USAGE lists them). */
interface Settings {
  concurrencyLevels: number[];
  defaultConcurrency: number;
  helpers: HelperChoice[];
  skipProfile: boolean;
  skipFailover: boolean;
  failoverNodes: number;
  killLeaderAfterMs: number;
  timeoutMs: { small: number; thousand: number; large: number; side: number; profile: number; failover: number };
}

/** The options and settings; every mistake in them is named in the one usage error, so one run finds them all. */
function options(): Options | undefined {
  const values = parsedOptions("bench", {
    sizes: { type: "string" },
    only: { type: "string" },
    "report-dir": { type: "string" },
    "markdown-only": { type: "boolean" },
    help: { type: "boolean" },
  });
  if (values.help) return undefined;
  const read = settingsReader(process.env);
  const chosen = {
    sizes: values.sizes === undefined ? read.wholeList("BENCH_SIZES", DEFAULT_SIZES) : read.wholeList("--sizes", DEFAULT_SIZES, values.sizes),
    only: values.only?.split(","),
    reportDir: reportDirOf(values["report-dir"]),
    markdownOnly: values["markdown-only"] ?? false,
    settings: settings(read),
  };
  if (read.problems.length > 0) throw new UsageError(`bench: ${read.problems.join("; ")}`);
  return chosen;
}

function settings(read: SettingsReader): Settings {
  return {
    concurrencyLevels: read.wholeList("BENCH_CONCURRENCY", [2, 5, 10]),
    defaultConcurrency: read.whole("BENCH_DEFAULT_CONCURRENCY", 10, 1),
    helpers: read.helpers("BENCH_HELPERS", ["inline", "node"]),
    skipProfile: read.flag("BENCH_SKIP_PROFILE"),
    skipFailover: read.flag("BENCH_SKIP_FAILOVER"),
    failoverNodes: read.whole("BENCH_FAILOVER_NODES", 300, 1),
    // 0 crashes the leader at the run's first poll (dev/local/run.ts), right after it starts.
    killLeaderAfterMs: read.whole("BENCH_KILL_AFTER_MS", 5_000, 0),
    timeoutMs: {
      small: read.seconds("BENCH_TIMEOUT_SMALL_S", 120),
      thousand: read.seconds("BENCH_TIMEOUT_1000_S", 240),
      large: read.seconds("BENCH_TIMEOUT_LARGE_S", 240),
      side: read.seconds("BENCH_TIMEOUT_SIDE_S", 120),
      profile: read.seconds("BENCH_TIMEOUT_PROFILE_S", 90),
      failover: read.seconds("BENCH_TIMEOUT_FAILOVER_S", 240),
    },
  };
}

type SettingsReader = ReturnType<typeof settingsReader>;

const DEFAULT_SIZES = [100, 1_000, 5_000];

/** The other helpers a run can take: bash is every other run's. */
const OTHER_HELPERS = ["inline", ...Object.keys(HELPERS).filter((name) => name !== "bash")] as HelperChoice[];

/**
 * Reads settings from `env`, an unset (or empty) one at its default; a wrong one is noted in
 * `problems` with what it takes, and read as its default, so the reading goes on to the next.
 */
function settingsReader(env: NodeJS.ProcessEnv) {
  const problems: string[] = [];
  const given = (name: string) => (env[name] === "" ? undefined : env[name]);
  const noted = <T>(reading: Reading<T>, fallback: T): T => {
    if ("value" in reading) return reading.value;
    problems.push(reading.problem);
    return fallback;
  };
  return {
    problems,
    whole: (name: string, fallback: number, least: number): number => noted(readWholeNumber(name, given(name), fallback, least), fallback),
    /** Whole numbers of at least 1 separated by commas; `text` when it is an option's, not `env`'s. */
    wholeList: (name: string, fallback: number[], text = given(name)): number[] => noted(readWholeNumbers(name, text === "" ? undefined : text, fallback), fallback),
    seconds(name: string, fallback: number): number {
      const text = given(name);
      const seconds = text === undefined ? fallback : Number(text);
      if (Number.isFinite(seconds) && seconds > 0) return seconds * 1000;
      problems.push(`${name} must be a number of seconds above 0, not ${text}`);
      return fallback * 1000;
    },
    flag(name: string): boolean {
      const text = given(name);
      if (text === undefined || text === "false") return false;
      if (text === "true") return true;
      problems.push(`${name} must be true or false, not ${text}`);
      return false;
    },
    /** Helper names separated by commas; set but empty, no helper (unlike the other settings, empty is not unset). */
    helpers(name: string, fallback: HelperChoice[]): HelperChoice[] {
      const text = env[name];
      if (text === undefined) return fallback;
      const names = text.split(",").filter(Boolean);
      if (names.every((helper) => (OTHER_HELPERS as string[]).includes(helper))) return names as HelperChoice[];
      problems.push(`${name} takes names from ${OTHER_HELPERS.join(", ")} (empty for none), not ${text}`);
      return fallback;
    },
  };
}

/** The runs `only` names, in the matrix's order; a name that is no run of it is a usage mistake, found before anything starts. */
function chosenRuns(matrix: RunSpec[], only: string[] | undefined): RunSpec[] {
  if (!only) return matrix;
  const unknown = only.filter((label) => !matrix.some((run) => run.label === label));
  if (unknown.length > 0) throw new UsageError(`bench: --only ${unknown.join(",")} names no run of this matrix (${matrix.map((run) => run.label).join(", ")})`);
  return matrix.filter((run) => only.includes(run.label));
}

interface Sample {
  rssSelf: number;
  rssNats: number;
  rssDynamo: number;
}

interface RunSpec {
  label: string;
  nodes: number;
  helper: HelperChoice;
  maxConcurrency: number;
  workers: number;
  standby?: boolean;
  killLeaderAfterMs?: number;
  profile?: boolean;
  timeoutMs?: number;
}

interface RunResult {
  label: string;
  complete: boolean;
  timeout_s: number;
  load_average_1m: { before: number; after: number };
  nodes: number;
  helper: string;
  max_concurrency: number;
  workers: number;
  provisioned: number;
  lost: number;
  dead_lettered: number;
  seconds_from_start: number;
  seconds_first_admission_to_last_restart: number;
  hosts_per_minute: number;
  latency_ms: { p50?: number; p95?: number; p99?: number; max?: number; samples: number };
  cpu_seconds: { self: number; helpers_and_reaped_children: number; nats_server: number; dynamodb_local: number; total: number };
  cpu_ms_per_host: number;
  peak_rss_mb: { self: number; nats_server: number; dynamodb_local: number; sum: number };
  dynamodb: { writes: number; reads: number; writes_per_host: number; reads_per_host: number; by_operation: Record<string, number> };
  sqs: {
    app_requests: number;
    event_source_requests: number;
    messages_sent: number;
    messages_per_host: number;
    requests_per_host: number;
    by_operation_app: Record<string, number>;
  };
  lambda: {
    invocations: number;
    invocations_per_host: number;
    per_host_invocations: number;
    by_function: RunSummary["invocations"];
  };
  cost_per_1000_hosts_usd: { lambda_requests: number; lambda_compute: number; sqs: number; dynamodb: number; total: number };
  failover?: RunSummary["failover"] & { no_host_lost: boolean };
  profile_top?: Array<{ function: string; location: string; self_ms: number; self_percent: number }>;
}

function helperName(helper: HelperChoice): string {
  return typeof helper === "object" ? helper.command : helper;
}

async function runOnce(spec: RunSpec): Promise<RunResult> {
  const admissions = hostWorkAdmissions();
  const options: LocalStackOptions = {
    nodes: spec.nodes,
    helper: spec.helper,
    maxConcurrency: spec.maxConcurrency,
    workers: spec.workers,
    deployments: spec.standby ? ["primary", "standby"] : ["primary"],
    // The Go server's 2 s (+ splay) restart delay only delays the node's return, not the pipeline.
    restartDelayMs: 2_000,
    waitTimeSeconds: 1,
    observe: admissions.observe,
  };
  process.stdout.write(`\n== ${spec.label}: ${spec.nodes} nodes, helper ${helperName(spec.helper)}, concurrency ${spec.maxConcurrency} x workers ${spec.workers}${spec.standby ? ", standby" : ""}\n`);
  const stack = await startLocalStack(options);
  currentStop = () => stack.stop();
  const samples: Sample[] = [];
  const session = spec.profile ? new Session() : undefined;
  try {
    const pids = { nats: stack.nats.pid, dynamo: stack.dynamoDb.pid };
    const loadBefore = loadavg()[0] ?? 0;
    const before = cpuReading(pids);
    const sampler = setInterval(() => {
      samples.push({ rssSelf: process.memoryUsage.rss(), rssNats: procMemory(pids.nats, "VmRSS"), rssDynamo: procMemory(pids.dynamo, "VmRSS") });
    }, 200);
    if (session) await startProfiler(session);
    let lastLine = 0;
    const summary = await runLocal(stack, {
      timeoutMs: spec.timeoutMs ?? 300_000,
      ...(spec.killLeaderAfterMs === undefined ? {} : { killLeaderAfterMs: spec.killLeaderAfterMs }),
      onSnapshot: (s) => {
        if (s.elapsedMs - lastLine >= 5_000) {
          lastLine = s.elapsedMs;
          process.stdout.write(`  ${(s.elapsedMs / 1000).toFixed(0)}s provisioned ${s.provisioned}/${s.total} in progress ${s.inProgress} failed ${s.failed} leader ${s.leader} term ${s.term}\n`);
        }
      },
      onEvent: (message) => process.stdout.write(`  ${message}\n`),
    });
    const profile = session ? ((await session.post("Profiler.stop")) as { profile: CpuProfile }).profile : undefined;
    clearInterval(sampler);
    const cpu = cpuUsed(before, cpuReading(pids, before.self));
    const result = runResult(spec, stack, summary, { admittedAt: admissions.admittedAt, samples, loadBefore, cpu, profile });
    process.stdout.write(
      `  -> ${summary.provisioned}/${spec.nodes} provisioned, ${result.hosts_per_minute} hosts/min, p50/p95/p99 ${result.latency_ms.p50}/${result.latency_ms.p95}/${result.latency_ms.p99} ms, ` +
        `${result.dynamodb.writes_per_host} DynamoDB writes/host, ${result.sqs.messages_per_host} SQS messages/host, CPU ${cpu.total.toFixed(1)} s\n`,
    );
    return result;
  } finally {
    session?.disconnect();
    await stack.stop();
  }
}

/** When each host's work was admitted, read from the host-work messages the Apps send to SQS. */
function hostWorkAdmissions() {
  const admittedAt = new Map<string, number[]>();
  const observe: LocalStackOptions["observe"] = ({ operation, body }) => {
    if (operation !== "SendMessageBatch" && operation !== "SendMessage") return;
    try {
      const parsed = JSON.parse(body) as { QueueUrl?: string; Entries?: Array<{ MessageBody?: string }>; MessageBody?: string };
      if (!parsed.QueueUrl?.endsWith("-host-work")) return;
      const bodies = parsed.Entries?.map((entry) => entry.MessageBody) ?? [parsed.MessageBody];
      for (const text of bodies) {
        const work = JSON.parse(text ?? "{}") as { identity?: string; admittedAt?: number };
        if (work.identity && typeof work.admittedAt === "number") {
          const times = admittedAt.get(work.identity) ?? [];
          times.push(work.admittedAt);
          admittedAt.set(work.identity, times);
        }
      }
    } catch {
      // Not host work.
    }
  };
  return { admittedAt, observe };
}

async function startProfiler(session: Session): Promise<void> {
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 1000 });
  await session.post("Profiler.start");
}

type CpuReading = ReturnType<typeof cpuReading>;

/** CPU time so far of this process's children, nats-server and DynamoDB Local, and this process's own since `selfSince`. */
function cpuReading(pids: { nats: number | undefined; dynamo: number | undefined }, selfSince?: NodeJS.CpuUsage) {
  return {
    self: process.cpuUsage(selfSince),
    children: cpuSeconds(procStat("self"), true) + helperLaunchersCpu(pids),
    nats: cpuSeconds(pids.nats === undefined ? undefined : procStat(pids.nats)),
    dynamo: cpuSeconds(pids.dynamo === undefined ? undefined : procStat(pids.dynamo)),
  };
}

/**
 * The helper launchers' CPU so far (lib/helper/launcher.ts): each is a live child of this process
 * other than nats-server and DynamoDB Local, and the helpers are its children, reaped by it, so
 * their time is in its cutime, not in this process's until the launcher itself is reaped.
 */
function helperLaunchersCpu(pids: { nats: number | undefined; dynamo: number | undefined }): number {
  const launchers = sumStats(childPids(process.pid).filter((pid) => pid !== pids.nats && pid !== pids.dynamo).map(procStat));
  return cpuSeconds(launchers) + cpuSeconds(launchers, true);
}

/** CPU seconds spent between the readings; `after.self` is already the difference. */
function cpuUsed(before: CpuReading, after: CpuReading): RunResult["cpu_seconds"] {
  const cpu = {
    self: (after.self.user + after.self.system) / 1e6,
    helpers_and_reaped_children: after.children - before.children,
    nats_server: after.nats - before.nats,
    dynamodb_local: after.dynamo - before.dynamo,
    total: 0,
  };
  cpu.total = cpu.self + cpu.helpers_and_reaped_children + cpu.nats_server + cpu.dynamodb_local;
  return cpu;
}

/** What runOnce measured around the run. */
interface Measured {
  admittedAt: Map<string, number[]>;
  samples: Sample[];
  loadBefore: number;
  cpu: RunResult["cpu_seconds"];
  profile: CpuProfile | undefined;
}

function runResult(spec: RunSpec, stack: LocalStack, summary: RunSummary, measured: Measured): RunResult {
  const { samples, cpu, profile } = measured;
  const { latencies, activeSeconds } = admissionToRestart(summary, measured.admittedAt);
  const provisioned = summary.provisioned;
  const perHost = (value: number) => (provisioned > 0 ? value / provisioned : 0);
  const peak = (pick: (s: Sample) => number) => Math.max(0, ...samples.map(pick)) / (1024 * 1024);
  return {
    label: spec.label,
    complete: summary.provisioned === summary.total,
    timeout_s: (spec.timeoutMs ?? 300_000) / 1000,
    load_average_1m: { before: round2(measured.loadBefore), after: round2(loadavg()[0] ?? 0) },
    nodes: spec.nodes,
    helper: helperName(spec.helper),
    max_concurrency: spec.maxConcurrency,
    workers: spec.workers,
    provisioned,
    lost: summary.lost.length,
    dead_lettered: summary.deadLetters.length,
    seconds_from_start: summary.elapsedMs / 1000,
    seconds_first_admission_to_last_restart: activeSeconds,
    hosts_per_minute: activeSeconds > 0 ? Math.round((provisioned / activeSeconds) * 60) : 0,
    latency_ms: {
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      max: latencies.at(-1),
      samples: latencies.length,
    },
    cpu_seconds: round(cpu),
    cpu_ms_per_host: Math.round(perHost(cpu.total) * 1000 * 10) / 10,
    peak_rss_mb: round({
      self: peak((s) => s.rssSelf),
      nats_server: peak((s) => s.rssNats),
      dynamodb_local: peak((s) => s.rssDynamo),
      sum: peak((s) => s.rssSelf + s.rssNats + s.rssDynamo),
    }),
    ...requestFigures(stack, summary, perHost),
    ...(summary.failover ? { failover: { ...summary.failover, no_host_lost: summary.provisioned === summary.total } } : {}),
    ...(profile ? { profile_top: summariseProfile(profile, 15) } : {}),
  };
}

/** Per host, the time from the admission of the work that provisioned it to its restart; and the span from the first admission to the last restart. */
function admissionToRestart(summary: RunSummary, admittedAt: Map<string, number[]>): { latencies: number[]; activeSeconds: number } {
  const latencies: number[] = [];
  for (const [identity, restartAt] of summary.restartedAt) {
    const admitted = (admittedAt.get(identity) ?? []).filter((at) => at <= restartAt);
    const last = admitted.at(-1);
    if (last !== undefined) latencies.push(restartAt - last);
  }
  latencies.sort((a, b) => a - b);
  const firstAdmission = Math.min(...[...admittedAt.values()].map((times) => times[0] ?? Infinity));
  const lastRestart = Math.max(...summary.restartedAt.values());
  const activeSeconds = Number.isFinite(firstAdmission) && Number.isFinite(lastRestart) ? (lastRestart - firstAdmission) / 1000 : NaN;
  return { latencies, activeSeconds };
}

/** The DynamoDB, SQS and Lambda requests the run made, and what they cost per 1,000 hosts. */
function requestFigures(
  stack: LocalStack,
  summary: RunSummary,
  perHost: (value: number) => number,
): Pick<RunResult, "dynamodb" | "sqs" | "lambda" | "cost_per_1000_hosts_usd"> {
  const dynamo = dynamoDbSplit(stack.traffic.dynamoDb.operations);
  const messagesSent = [...stack.traffic.sqsApp.messagesSent.values()].reduce((a, b) => a + b, 0);
  const sqsRequests = stack.traffic.sqsApp.total() + stack.traffic.sqsEventSources.total();
  const byFunction = summary.invocations;
  const perHostFunctions = Object.entries(byFunction).filter(([name]) => /-(provision|lifecycle|discover)$/.test(name));
  const perHostInvocations = perHostFunctions.reduce((sum, [, figures]) => sum + figures.invocations, 0);
  const perHostGbSeconds = perHostFunctions.reduce((sum, [, figures]) => sum + figures.gbSeconds, 0);
  return {
    dynamodb: {
      writes: dynamo.writes,
      reads: dynamo.reads,
      writes_per_host: round2(perHost(dynamo.writes)),
      reads_per_host: round2(perHost(dynamo.reads)),
      by_operation: Object.fromEntries(stack.traffic.dynamoDb.operations),
    },
    sqs: {
      app_requests: stack.traffic.sqsApp.total(),
      event_source_requests: stack.traffic.sqsEventSources.total(),
      messages_sent: messagesSent,
      messages_per_host: round2(perHost(messagesSent)),
      requests_per_host: round2(perHost(sqsRequests)),
      by_operation_app: Object.fromEntries(stack.traffic.sqsApp.operations),
    },
    lambda: {
      invocations: stack.ledger.count(),
      invocations_per_host: round2(perHost(stack.ledger.count())),
      per_host_invocations: round2(perHost(perHostInvocations)),
      by_function: byFunction,
    },
    cost_per_1000_hosts_usd: costPer1000Hosts(perHost, { invocations: perHostInvocations, gbSeconds: perHostGbSeconds, sqsRequests, dynamo }),
  };
}

/** At PRICES; Lambda counts only the per-host functions' invocations and GB-seconds. */
function costPer1000Hosts(
  perHost: (value: number) => number,
  usage: { invocations: number; gbSeconds: number; sqsRequests: number; dynamo: { writes: number; reads: number } },
): RunResult["cost_per_1000_hosts_usd"] {
  const thousand = (value: number) => perHost(value) * 1000;
  const lambdaRequests = thousand(usage.invocations) * (PRICES.lambdaPerMillionRequests / 1e6);
  const lambdaCompute = thousand(usage.gbSeconds) * PRICES.lambdaPerGbSecondArm64;
  const sqs = thousand(usage.sqsRequests) * (PRICES.sqsPerMillionRequests / 1e6);
  const dynamodb = thousand(usage.dynamo.writes) * (PRICES.dynamoDbPerMillionWrites / 1e6) + thousand(usage.dynamo.reads) * (PRICES.dynamoDbPerMillionReads / 1e6);
  return {
    lambda_requests: round6(lambdaRequests),
    lambda_compute: round6(lambdaCompute),
    sqs: round6(sqs),
    dynamodb: round6(dynamodb),
    total: round6(lambdaRequests + lambdaCompute + sqs + dynamodb),
  };
}

const round6 = (value: number) => Math.round(value * 1e6) / 1e6;
function round<T extends Record<string, number>>(values: T): T {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, round2(value)])) as T;
}

function markdown(results: RunResult[], generated: string, wallSeconds: number): string {
  const lines = [
    ...introduction(generated, wallSeconds),
    ...throughputTable(results),
    ...resourcesTable(results),
    ...requestsTable(results),
    ...failoverSection(results),
    ...targetsTable(results),
  ];
  const found = findings(results);
  if (found.length > 0) lines.push("", "## Findings", "", ...found);
  lines.push(...profileSection(results));
  return `${lines.join("\n")}\n`;
}

function introduction(generated: string, wallSeconds: number): string[] {
  const cpu = cpus();
  return [
    "# Pipeline benchmark",
    "",
    `Generated ${generated} by \`npx tsx bench/pipeline.ts\` on ${cpu.length} CPU(s) (${cpu[0]?.model ?? "unknown"}), Node ${process.version}; the whole benchmark took ${wallSeconds.toFixed(0)} s.`,
    "",
    "Each run starts its own nats-server, DynamoDB Local and fauxqs, a simulated fleet and one deployment (two for the failover run),",
    "with `features: {jwt: true, ed25519: true}`, the lease on (30 s / 10 s / 5 s) and AWS timings (not `--fast`). The real handlers",
    "run under the emulated Lambda runtime (dev/local/lambda-runtime.ts). Everything but nats-server, DynamoDB Local and the helper",
    "processes shares this one Node process and its event loop: the fleet simulator (up to 5,000 servers answering RPCs),",
    "fauxqs, every invocation of every function, and the counting proxies.",
    "",
    "- **hosts/minute**: provisioned hosts / time from the first host-work admission to the last restart acknowledgement.",
    "- **latency**: per host, from `admittedAt` of the host work that provisioned it to the node recording the `restart` request.",
    "- **CPU**: this process (`process.cpuUsage`), the helper processes (reaped children from `/proc/self/stat` cutime+cstime, and the live helper launchers with the helpers they reaped), nats-server and the DynamoDB Local JVM (`/proc/<pid>/stat`).",
    "- **memory**: peak of RSS samples every 200 ms (this process, nats-server, the JVM, and their sum).",
    "- **requests**: counted by proxies in front of DynamoDB Local and fauxqs (by `X-Amz-Target`); event-source SQS requests are the emulated Lambda pollers' ReceiveMessage / DeleteMessageBatch, which AWS also bills.",
    "",
  ];
}

function throughputTable(results: RunResult[]): string[] {
  const lines = ["## Throughput and latency", ""];
  lines.push("| run | nodes | helper | concurrency × workers | provisioned | complete | hosts/min | p50 ms | p95 ms | p99 ms | max ms | wall s | load 1m before/after |");
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    lines.push(
      `| ${r.label} | ${r.nodes} | ${r.helper.includes("/") ? r.helper.split("/").at(-1) : r.helper} | ${r.max_concurrency} × ${r.workers} | ${r.provisioned} | ${r.complete ? "yes" : `no (stopped at ${r.timeout_s} s)`} | ${r.hosts_per_minute} | ${r.latency_ms.p50 ?? "-"} | ${r.latency_ms.p95 ?? "-"} | ${r.latency_ms.p99 ?? "-"} | ${r.latency_ms.max ?? "-"} | ${r.seconds_from_start.toFixed(1)} | ${r.load_average_1m.before} / ${r.load_average_1m.after} |`,
    );
  }
  return lines;
}

function resourcesTable(results: RunResult[]): string[] {
  const lines = ["", "## Resources", ""];
  lines.push("| run | CPU s total | self | helpers | nats | DynamoDB Local | CPU ms/host | peak RSS MB (self / nats / JVM / sum) |");
  lines.push("|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const c = r.cpu_seconds;
    const m = r.peak_rss_mb;
    lines.push(`| ${r.label} | ${c.total} | ${c.self} | ${c.helpers_and_reaped_children} | ${c.nats_server} | ${c.dynamodb_local} | ${r.cpu_ms_per_host} | ${m.self} / ${m.nats_server} / ${m.dynamodb_local} / ${m.sum} |`);
  }
  return lines;
}

function requestsTable(results: RunResult[]): string[] {
  const lines = ["", "## Requests and cost per host", ""];
  lines.push(
    `Prices (us-east-1 on-demand, stated not fetched): Lambda $${PRICES.lambdaPerMillionRequests}/M requests + $${PRICES.lambdaPerGbSecondArm64}/GB-s (arm64); SQS $${PRICES.sqsPerMillionRequests}/M requests; DynamoDB on-demand $${PRICES.dynamoDbPerMillionWrites}/M writes, $${PRICES.dynamoDbPerMillionReads}/M reads.`,
    "Per-host cost counts the provision, lifecycle and discover invocations (durations as measured in-process, 512/256/256 MB);",
    "the lease keeper and lifecycle bridge run for a fixed time per minute whatever the fleet size (about $4-5 a month per deployment, docs/lease.md) and are left out.",
    "",
  );
  lines.push("| run | DynamoDB writes/host | reads/host | SQS messages/host | SQS requests/host | Lambda invocations/host (per-host functions) | $ per 1,000 hosts |");
  lines.push("|---|---|---|---|---|---|---|");
  for (const r of results) {
    lines.push(
      `| ${r.label} | ${r.dynamodb.writes_per_host} | ${r.dynamodb.reads_per_host} | ${r.sqs.messages_per_host} | ${r.sqs.requests_per_host} | ${r.lambda.per_host_invocations} | ${r.cost_per_1000_hosts_usd.total.toFixed(4)} |`,
    );
  }
  return lines;
}

function failoverSection(results: RunResult[]): string[] {
  const failover = results.find((r) => r.failover);
  if (!failover?.failover) return [];
  const f = failover.failover;
  return [
    "",
    "## Failover",
    "",
    `${failover.nodes} nodes, a leader and a standby deployment with the default lease (30 s / 10 s / 5 s, the keeper every minute arming the minute's ticks). ` +
      `The leader was crashed ${(f.killedAtMs / 1000).toFixed(1)} s into the run (schedules and pollers stopped, running invocations out of time, no release).`,
    "",
    `- failover (crash → standby's claim visible in the lease table): **${f.tookMs === undefined ? "did not happen" : `${(f.tookMs / 1000).toFixed(1)} s`}** (new term ${f.newTerm ?? "-"})`,
    `- hosts provisioned: ${failover.provisioned}/${failover.nodes}; lost: ${failover.lost}; dead-lettered: ${failover.dead_lettered}; no host lost: ${f.no_host_lost}`,
  ];
}

/** The project's targets against the measured figures. */
function targetsTable(results: RunResult[]): string[] {
  const lines = ["", "## Targets", ""];
  lines.push("Figures, not assertions. A run marked incomplete stopped at its time limit; its hosts/min is over the hosts it did provision.", "");
  lines.push("| target | measured | verdict |", "|---|---|---|");
  const byLabel = (label: string) => results.find((r) => r.label === label);
  const measured = results.filter((r) => !r.failover && !r.profile_top).sort((a, b) => b.hosts_per_minute - a.hosts_per_minute);
  const best = measured[0];
  if (best) {
    const bashBest = measured.find((r) => r.helper.endsWith(".sh") || r.helper === "bash");
    lines.push(
      `| >= 10,000 hosts/min | best ${best.hosts_per_minute} (${best.label})${bashBest ? `; best with the bash helper ${bashBest.hosts_per_minute} (${bashBest.label})` : ""} | ${best.hosts_per_minute >= 10_000 ? "met" : `missed, ${(10_000 / Math.max(1, best.hosts_per_minute)).toFixed(1)}x short`} |`,
    );
  }
  const levels = results.filter((r) => /^bash-1000(-c\d+)?$/.test(r.label)).sort((a, b) => a.max_concurrency - b.max_concurrency);
  if (levels.length > 1) {
    const growing = levels.every((r, i) => i === 0 || r.hosts_per_minute >= (levels[i - 1]?.hosts_per_minute ?? 0));
    lines.push(`| throughput grows with concurrency | ${levels.map((r) => `c${r.max_concurrency}: ${r.hosts_per_minute}`).join(", ")} | ${growing ? "yes" : "not monotonic"} |`);
  }
  const thousand = byLabel("bash-1000");
  if (thousand) {
    const p99 = thousand.latency_ms.p99 ?? Infinity;
    lines.push(`| p99 admission-to-restart < 2 s at 1,000 nodes | ${thousand.latency_ms.p99 ?? "-"} ms (bash); ${byLabel("inline-1000")?.latency_ms.p99 ?? "-"} ms (inline helper) | ${p99 < 2_000 ? "met" : `missed, ${(p99 / 2_000).toFixed(0)}x`} |`);
    lines.push(`| <= 4 DynamoDB writes per host | ${thousand.dynamodb.writes_per_host} (bash-1000) | ${thousand.dynamodb.writes_per_host <= 4 ? "met" : `missed by ${(thousand.dynamodb.writes_per_host - 4).toFixed(2)}`} |`);
    lines.push(`| <= 2 SQS messages per host | ${thousand.sqs.messages_per_host} (bash-1000) | ${thousand.sqs.messages_per_host <= 2 ? "met" : "missed"} |`);
  }
  const failover = results.find((r) => r.failover);
  if (failover?.failover) {
    const took = failover.failover.tookMs;
    lines.push(
      `| failover < 45 s with defaults, no host lost | ${took === undefined ? "no takeover" : `${(took / 1000).toFixed(1)} s`}, ${failover.provisioned}/${failover.nodes} provisioned | ${took !== undefined && took < 45_000 && failover.failover.no_host_lost ? "met" : "missed"} |`,
    );
  }
  return lines;
}

function profileSection(results: RunResult[]): string[] {
  const profiled = results.find((r) => r.profile_top);
  if (!profiled?.profile_top) return [];
  const lines = ["", `## Profile (${profiled.label})`, ""];
  lines.push("V8 CPU profile of this process (the same sampler as `node --cpu-prof`, started through `node:inspector`), top self time:", "");
  lines.push("| function | location | self ms | % |", "|---|---|---|---|");
  for (const entry of profiled.profile_top) lines.push(`| ${entry.function} | ${entry.location} | ${entry.self_ms} | ${entry.self_percent} |`);
  return lines;
}

let currentStop: (() => Promise<void>) | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    process.stdout.write(`\n${signal}: stopping the running stack\n`);
    void (currentStop?.() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

/**
 * What the runs say, computed from them (so `--markdown-only` rewrites it from bench.json); where a
 * cause is named, the report that measures it is named with it.
 */
function findings(results: RunResult[]): string[] {
  const byLabel = (label: string) => results.find((r) => r.label === label);
  const size = referenceSize(results);
  const bash = byLabel(`bash-${size}`);
  const inline = byLabel(`inline-${size}`);
  const lines: string[] = [];
  if (bash && inline) {
    const perHost = (r: RunResult) => round2((r.cpu_seconds.total * 1000) / Math.max(1, r.provisioned));
    const busy = (r: RunResult) => round2((perHost(r) / 1000) * (r.hosts_per_minute / 60));
    lines.push(
      `**Where the CPU goes.** Every process of a run shares this machine's ${cpus().length} cores: ${perHost(bash)} ms of CPU a host with the bash + jq helper (${bash.hosts_per_minute} hosts/min, ${busy(bash)} cores busy), ${perHost(inline)} ms with the in-process one (${inline.hosts_per_minute} hosts/min, ${busy(inline)} cores). ` +
        "The helper processes are most of the difference; reports/peer.md splits a host's CPU by process (provisioner, helpers, fleet, nats-server, DynamoDB Local) beside the Go provisioner's. " +
        "On AWS the provision function fans out over Lambda containers with CPUs of their own, and DynamoDB and SQS are not on the box: the CPU per host carries over, this machine's ceiling does not.",
      "",
    );
  }
  if (bash) {
    lines.push(
      `**Writes per host.** ${bash.dynamodb.writes_per_host} DynamoDB writes a host in ${bash.label}: the five of a host provisioned with expiring credentials (admit, claim, ledger record, credentials before configure, end of the claim; docs/behaviour.md §2, "Writes per host", says what each pays for), plus the invocations' lease rounds and admissions refused by their condition. ` +
        "The <= 4 target predates the ledger record and the credentials write; reports/store-writes.md has each write's CPU and what joining them would cost.",
      "",
    );
  }
  const failover = results.find((r) => r.failover)?.failover;
  if (failover) {
    lines.push(
      "**Failover.** The < 45 s target predates the lease keeper's minute schedule arming ticks (no function loops while the site is idle): a standby's next tick comes at the lease's `claimableAt`, armed by its keeper run of that minute. reports/failover.md measures it with the production gate.",
      "",
    );
  }
  return lines;
}

/**
 * Every run of the benchmark, in order: the bash helper at each size, then at one size (1,000 nodes
 * when measured, the pipeline's reference) the other concurrency levels, the other helpers, the
 * profiled run and the failover run.
 */
function runMatrix(sizes: number[], settings: Settings): RunSpec[] {
  const bash: HelperChoice = "bash";
  const { timeoutMs } = settings;
  const run = (label: string, nodes: number, runTimeoutMs: number, extra: Partial<RunSpec> = {}): RunSpec => ({
    label,
    nodes,
    helper: bash,
    maxConcurrency: settings.defaultConcurrency,
    workers: 10,
    timeoutMs: runTimeoutMs,
    ...extra,
  });
  const runs = sizes.map((nodes) => run(`bash-${nodes}`, nodes, nodes <= 100 ? timeoutMs.small : nodes <= 1_000 ? timeoutMs.thousand : timeoutMs.large));
  const scaleSize = sizes.includes(1_000) ? 1_000 : (sizes[0] ?? 100);
  for (const level of settings.concurrencyLevels.filter((level) => level !== settings.defaultConcurrency)) {
    runs.push(run(`bash-${scaleSize}-c${level}`, scaleSize, timeoutMs.side, { maxConcurrency: level }));
  }
  for (const helper of settings.helpers) runs.push(run(`${helperName(helper)}-${scaleSize}`, scaleSize, timeoutMs.side, { helper }));
  if (!settings.skipProfile) runs.push(run(`profiled-bash-${scaleSize}`, scaleSize, timeoutMs.profile, { profile: true }));
  if (!settings.skipFailover) {
    runs.push(run(`failover-${settings.failoverNodes}`, settings.failoverNodes, timeoutMs.failover, { standby: true, killLeaderAfterMs: settings.killLeaderAfterMs }));
  }
  return runs;
}

/** The size the findings read the runs at: as the matrix picks its side runs' size, 1,000 nodes when run, else the first size with the bash helper. */
function referenceSize(results: RunResult[]): number | undefined {
  const sizes = results.filter((r) => /^bash-\d+$/.test(r.label)).map((r) => r.nodes);
  return sizes.includes(1_000) ? 1_000 : sizes[0];
}

/**
 * The report `--markdown-only` rewrites bench.md from. A file missing, not JSON or not a report
 * is a usage mistake (exit 2); a run is trusted to hold what runOnce writes.
 */
function recordedReport(jsonPath: string): { generated: string; wall_seconds?: number; runs: RunResult[] } {
  const recorded = recordedJson(jsonPath, (what, detail, cause) =>
    what === "missing"
      ? new UsageError(`bench: --markdown-only reads ${jsonPath}, which ${detail}: run \`npm run bench\` with the same --report-dir first`, { cause })
      : new UsageError(`bench: ${jsonPath} ${detail}: \`npm run bench\` writes it`, { cause }),
  );
  const report = recorded as { generated?: unknown; runs?: unknown };
  const isRun = (run: unknown) => typeof (run as { label?: unknown } | null)?.label === "string";
  if (typeof report?.generated !== "string" || !Array.isArray(report.runs) || !report.runs.every(isRun)) {
    throw new UsageError(`bench: ${jsonPath} is not a bench report (no "generated" time, or no "runs" with labels): \`npm run bench\` writes it`);
  }
  return recorded as { generated: string; wall_seconds?: number; runs: RunResult[] };
}

async function main(): Promise<void> {
  const chosen = options();
  if (!chosen) {
    process.stdout.write(USAGE);
    return;
  }
  const jsonPath = join(chosen.reportDir, "bench.json");
  const markdownPath = join(chosen.reportDir, "bench.md");
  if (chosen.markdownOnly) {
    const recorded = recordedReport(jsonPath);
    await writeFile(markdownPath, markdown(recorded.runs, recorded.generated, recorded.wall_seconds ?? 0));
    process.stdout.write(`rewrote ${markdownPath} from ${jsonPath}\n`);
    return;
  }
  const runs = chosenRuns(runMatrix(chosen.sizes, chosen.settings), chosen.only);
  const started = Date.now();
  const results: RunResult[] = [];
  for (const spec of runs) results.push(await runOnce(spec));
  const generated = new Date().toISOString();
  const wallSeconds = (Date.now() - started) / 1000;
  await mkdir(chosen.reportDir, { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify({ generated, wall_seconds: wallSeconds, cpus: cpus().length, node: process.version, prices_usd: PRICES, runs: results }, null, 2)}\n`);
  await writeFile(markdownPath, markdown(results, generated, wallSeconds));
  process.stdout.write(`\nwrote ${jsonPath} and ${markdownPath} (${wallSeconds.toFixed(0)} s)\n`);
}

runBenchmark("benchmark", main);
