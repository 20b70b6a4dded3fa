/**
 * Side-by-side benchmark: the Go Choria Provisioner (choria-io/provisioner, built by
 * scripts/peers/build-provisioner.sh) and this project on fresh simulated fleets, with the same
 * helpers (bash + jq, and a compiled one) and the same features (jwt + ed25519).
 *
 *   npm run bench:peer                 writes reports/peer.json and reports/peer.md
 *   npm run bench:peer -- --help       its options (bench/peer-options.ts); starts nothing
 *   npm run bench:peer -- --sizes 1000 --pairs 5 --tuned 20x20
 *   npm run bench:peer -- --no-cliff 5000 --store-delay-ms 600   (ours alone, merged into peer.json)
 *   npm run bench:peer -- --markdown-only --report-dir <dir>     (peer.md again from <dir>/peer.json's pairs)
 *   CHORIA_PROVISIONER_BIN=/path/to/provisioner npm run bench:peer      (a Go binary built elsewhere)
 *
 * Every run gets its own nats-server and a fresh simulated fleet in a process of its own
 * (bench/peer-fleet.ts): a node holds its provisioning lock for 2 minutes per caller, so the two
 * provisioners never share a fleet. The provisioner under test is one process: the Go binary, or
 * bench/peer-ours.ts (the real handlers under the emulated Lambda runtime). Its CPU comes from
 * /proc/<pid>/stat, its peak memory from VmHWM; the fleet, nats-server, DynamoDB Local and fauxqs
 * run in other processes and are counted apart.
 *
 * Runs come in alternated pairs (bench/peer-summary.ts has the rules): per size, helper and config,
 * pair 1 runs Go then ours, pair 2 ours then Go, and so on; gates on the start load and the CPU
 * steal refuse a pair, which is then run again; a fleet's ratio is the median of its counted pairs.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { encodeHex } from "../lib/crypto/encoding";
import { ed25519SigningKey, generateEd25519Seed } from "../test/support/choria-node/keys";
import { startDynamoDbLocal, startNats, startSqs, type RunningDynamoDb, type RunningNats } from "../dev/local/services";
import { startCountingProxy } from "../dev/local/request-counter";
import { HELPERS, LOCAL_PROVISIONING_TOKEN } from "../dev/local/stack";
import { recordedJson, runBenchmark, UsageError } from "./command";
import { buildCompiledHelper } from "./compiled-helper";
import { bundleOurs } from "./ours-bundle";
import { childPids, cpuSeconds, procMemory, procStat, round2, sumStats, summariseProfile, type CpuProfile, type ProfileEntry } from "./measure";
import type { FleetReport } from "./peer-fleet";
import { parsePeerOptions, PEER_USAGE, type OursSetting, type PeerOptions } from "./peer-options";
import type { OursReport, OursSettings } from "./peer-ours";
import { markdown, type NoCliff, type Report, type RunResult } from "./peer-report";
import { runRealFleet, summariseRealFleet, type RealFleetReport, type RealFleetRun } from "./peer-realfleet";
import { orderOf, pairOf, summarise, type HelperKind, type OursConfig, type Pair, type Side } from "./peer-summary";
import { admissionTimeline, discoveryToRestart, longestAdmissionGapS, parseCpuTicks, percentiles, stealPercent, type Admission, type CpuTicks } from "./peer-timeline";
import { breakdown, stagesTable, type StageBreakdown } from "./stages";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const REPO_ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
/** Set first thing in main(): a usage mistake ends the run before anything starts. */
let options: PeerOptions;
const CORES = cpus().length;
/**
 * With --stand-ins-apart, both sides' processes run on PEERS_CPU, and this process, with fauxqs in
 * it and DynamoDB Local started from it, on STAND_INS_CPU: on AWS those services are not on the
 * provisioner's machine.
 */
const PEERS_CPU = "0";
const STAND_INS_CPU = "1";
/** The product's defaults: serverless.yml's provisionMaxConcurrency and the `workers` default. */
const OURS_DEFAULT: OursSetting = { maxConcurrency: 10, workers: 10 };
/** A pair slot refused by a gate is run again at most this many more times. */
const EXTRA_ATTEMPTS = 2;
/** How often the load average is sampled through a run. */
const LOAD_SAMPLE_MS = 5_000;
const RESTART_DELAY_MS = 2_000;
const timeoutFor = (nodes: number) => (options.timeoutS ?? Math.max(180, 120 + nodes * 0.1)) * 1000;

/** AWS SDK requests of ours that outlived their client timeout (retried by the SDK), this run. */
let sdkSlowRequests = 0;

interface RunSpec {
  side: Side;
  fleet: string;
  nodes: number;
  /** Go: workers. Ours: provision concurrency x workers. */
  setting: { workers: number; maxConcurrency?: number };
  config: OursConfig;
  helper: HelperKind;
  pair?: string;
  profile?: boolean;
}
interface Child {
  process: ChildProcess;
  pid: number;
  exited: Promise<number | null>;
}

function spawnChild(command: string, args: string[], env: Record<string, string>, spawnOptions: { ipc?: boolean; cwd?: string } = {}): Child {
  // taskset execs the command in its own process: the pid is the command's.
  const [file, argv] = options.standInsApart ? ["taskset", ["-c", PEERS_CPU, command, ...args]] : [command, args];
  const child = spawn(file, argv, {
    cwd: spawnOptions.cwd ?? REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: spawnOptions.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  return { process: child, pid: child.pid, exited };
}

/**
 * A child run by this Node (so its pid is the process doing the work): a TypeScript script through
 * the tsx loader, or a bundle (`.mjs`) as it is.
 */
function spawnTs(script: string, env: Record<string, string>, nodeFlags: string[] = []): Child {
  const loader = script.endsWith(".ts") ? ["--import", "tsx"] : [];
  const child = spawnChild(process.execPath, [...nodeFlags, ...loader, resolve(REPO_ROOT, script)], env, { ipc: true });
  child.process.stderr?.on("data", (chunk: Buffer) => {
    // The AWS SDK warns on every request slower than its timeout (DynamoDB Local under load): count, don't print.
    const text = chunk.toString();
    const slow = text.match(/exceeded the configured \d+ ms requestTimeout/g)?.length ?? 0;
    sdkSlowRequests += slow;
    const rest = text.split("\n").filter((line) => line.trim() !== "" && !line.includes("requestTimeout")).join("\n");
    if (rest) process.stderr.write(`  [${script}] ${rest}\n`);
  });
  child.process.stdout?.resume();
  return child;
}

function waitForMessage<T extends { type: string }>(child: Child, type: string, timeoutMs: number): Promise<T> {
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`no ${type} from pid ${child.pid} within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (message: T) => {
      if (message.type !== type) return;
      clearTimeout(timer);
      child.process.off("message", onMessage);
      done(message);
    };
    child.process.on("message", onMessage);
    void child.exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`pid ${child.pid} exited (${code}) before ${type}`));
    });
  });
}

async function stopChild(child: Child, how: () => void, timeoutMs = 15_000): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  how();
  const timer = setTimeout(() => child.process.kill("SIGKILL"), timeoutMs);
  await child.exited;
  clearTimeout(timer);
}

/** The Go provisioner: CHORIA_PROVISIONER_BIN, or what scripts/peers/build-provisioner.sh builds. */
function goProvisioner(): { bin?: string; reason?: string } {
  const given = process.env.CHORIA_PROVISIONER_BIN;
  if (given) return existsSync(given) ? { bin: given } : { reason: `CHORIA_PROVISIONER_BIN=${given} does not exist` };
  const build = spawnSync("bash", [join(REPO_ROOT, "scripts/peers/build-provisioner.sh")], { encoding: "utf8" });
  if (build.status !== 0) return { reason: `scripts/peers/build-provisioner.sh failed: ${(build.stderr || build.stdout).trim().split("\n").slice(-3).join(" ")}` };
  const bin = build.stdout.trim().split("\n").at(-1);
  return bin && existsSync(bin) ? { bin } : { reason: `scripts/peers/build-provisioner.sh printed no binary path` };
}

interface Shared {
  dynamoDb: RunningDynamoDb;
  /** Where ours reaches DynamoDB: DynamoDB Local, or the delaying proxy in front of it (--store-delay-ms). */
  dynamoDbUrl: string;
  goBin: string | undefined;
  helpers: Record<HelperKind, string | undefined>;
  /** Ours bundled as the functions are (bench/ours-bundle.ts), run by plain node. */
  oursBundle: string;
}

/**
 * Waits (bounded by --load-wait) for the 1-minute load average to fall below the start gate, so a
 * run does not start on a machine busy with other work; the start load is recorded either way and
 * a run that starts above the gate refuses its pair.
 */
async function waitForQuietMachine(): Promise<void> {
  const until = Date.now() + options.loadWaitS * 1000;
  let said = false;
  while ((loadavg()[0] ?? 0) >= options.maxStartLoad && Date.now() < until) {
    if (!said) process.stdout.write(`  waiting up to ${options.loadWaitS} s for the 1-minute load (${(loadavg()[0] ?? 0).toFixed(2)}) to fall below ${options.maxStartLoad}\n`);
    said = true;
    await new Promise((done) => setTimeout(done, 2_000));
  }
}

/** The "cpu" line of /proc/stat now (for the steal over a run). */
const cpuTicks = (): CpuTicks => parseCpuTicks(readFileSync("/proc/stat", "utf8"));

/** The CPU model, once per report. */
function cpuModel(): string {
  const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
  return match?.[1]?.trim() ?? cpus()[0]?.model ?? "unknown";
}

/** What the steps of one run share. */
interface RunContext {
  spec: RunSpec;
  shared: Shared;
  helperCommand: string;
  workDir: string;
  /** The seed of the key that signs the fleet's provisioning JWT. */
  seed: Uint8Array;
  nats: RunningNats;
  /** Undone last first when the run ends, whatever happened. */
  cleanup: Array<() => Promise<unknown>>;
}

async function runOnce(spec: RunSpec, shared: Shared): Promise<RunResult> {
  const setting = spec.side === "go" ? `workers ${spec.setting.workers}` : `${spec.setting.maxConcurrency} x ${spec.setting.workers}`;
  const helperCommand = shared.helpers[spec.helper];
  if (!helperCommand) throw new Error(`the ${spec.helper} helper is not available`);
  process.stdout.write(`\n== ${spec.side}${spec.profile ? " (profiled)" : ""}: ${spec.nodes} nodes (${spec.fleet}), ${setting} (${spec.config}), ${spec.helper} helper${spec.pair ? `, pair ${spec.pair}` : ""}\n`);
  const timeoutMs = timeoutFor(spec.nodes);
  sdkSlowRequests = 0;
  const workDir = await mkdtemp(join(tmpdir(), `peer-${spec.side}-`));
  const seed = generateEd25519Seed();
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const nats: RunningNats = await startNats();
    cleanup.push(() => nats.stop());
    if (options.standInsApart && nats.pid !== undefined) pin(nats.pid, PEERS_CPU);
    const context: RunContext = { spec, shared, helperCommand, workDir, seed, nats, cleanup };
    const { fleet, progress } = await startPeerFleet(context);
    const othersCpuSince = otherProcessesCpu(fleet.pid, nats.pid, shared.dynamoDb.pid);
    const admissions = admissionLog();
    // The wait for a quiet machine comes right before a side starts working: Go discovers as soon as
    // it is spawned, ours once told to start (after its start-up).
    const provisioner = spec.side === "go" ? await startGoSide(context, admissions.admit) : await startOursSide(context, admissions.admit);
    const loadStart = loadavg()[0] ?? 0;
    const ticksBefore = cpuTicks();
    const loadSamples = [loadStart];
    const sampler = setInterval(() => loadSamples.push(loadavg()[0] ?? 0), LOAD_SAMPLE_MS);
    cleanup.push(async () => clearInterval(sampler));
    // Ours starts helpers through its launcher process, a long-lived child: its own CPU and memory
    // are ours', its reaped children are the helpers. Go forks each helper itself.
    const provisionerPids = () => [provisioner.child.pid, ...(spec.side === "ours" ? childPids(provisioner.child.pid) : [])];
    const provisionerStat = () => sumStats(provisionerPids().map(procStat));
    const cpuBefore = provisionerStat();
    const benchmarkCpuBefore = process.cpuUsage();
    await awaitRestarts(context, provisioner, progress, admissions.admittedAt, timeoutMs);
    const endedAt = Date.now();
    const stealPct = stealPercent(ticksBefore, cpuTicks());
    const cpuAfter = provisionerStat();
    const benchmarkCpu = process.cpuUsage(benchmarkCpuBefore);
    const peakMemory = provisionerPids().reduce((sum, pid) => sum + procMemory(pid, "VmHWM"), 0);
    const othersCpu = othersCpuSince();
    const loadAfter = loadavg()[0] ?? 0;
    const stages = spec.side === "ours" ? await oursStages(provisioner.child, progress) : undefined;
    clearInterval(sampler);
    loadSamples.push(loadAfter);
    const profileTop = provisioner.profileDir ? await stopAndSummariseProfile(provisioner.child, provisioner.profileDir) : undefined;

    const result = runResult(spec, { setting, timeoutMs, progress, admittedAt: admissions.admittedAt }, {
      provisionerCpu: cpuSeconds(cpuAfter) - cpuSeconds(cpuBefore),
      helperCpu: cpuSeconds(cpuAfter, true) - cpuSeconds(cpuBefore, true),
      ...othersCpu,
      benchmarkCpu: (benchmarkCpu.user + benchmarkCpu.system) / 1e6,
      peakMemory,
      load: { start: loadStart, samples: loadSamples, after: loadAfter },
      stealPct,
      endedAt,
      profileTop,
      stages,
    });
    process.stdout.write(
      `  -> ${result.provisioned}/${spec.nodes} restarted, ${result.hosts_per_min} hosts/min, p99 admission/discovery -> restart ${result.admission_to_restart_ms.p99}/${result.discovery_to_restart_ms.p99} ms, longest admission gap ${result.longest_admission_gap_s} s, ` +
        `${result.cpu_ms_per_host} CPU ms/host (+${result.helper_cpu_ms_per_host} helpers), VmHWM ${result.peak_memory_mb} MB, refused ${progress.refused}${progress.lastRefusal ? ` (last: ${progress.lastRefusal})` : ""}, ` +
        `load ${result.start_load} at start (max ${result.load_average_1m.max})${result.start_load > options.maxStartLoad ? ` ABOVE the gate ${options.maxStartLoad}` : ""}, steal ${result.steal_pct} %\n`,
    );
    return result;
  } finally {
    for (const step of cleanup.reverse()) await step().catch((error: unknown) => process.stderr.write(`cleanup: ${String(error)}\n`));
    await rm(workDir, { recursive: true, force: true });
  }
}

/**
 * What the fleet reported so far: when each node answered inventory and acknowledged its restart,
 * when discovery broadcasts reached it, when its nodes started, and the requests it refused.
 */
interface FleetProgress {
  restartedAt: Map<string, number>;
  inventoryAt: Map<string, number>;
  discoveries: number[];
  startedAt: number;
  refused: number;
  lastRefusal: string | undefined;
}

/** Starts the simulated fleet in its own process; resolves once it is ready, with what it reports from then on. */
async function startPeerFleet(context: RunContext): Promise<{ fleet: Child; progress: FleetProgress }> {
  const fleet = spawnTs("bench/peer-fleet.ts", {
    PEER_FLEET: JSON.stringify({
      natsUrl: context.nats.url,
      count: context.spec.nodes,
      signerSeedHex: encodeHex(context.seed),
      token: LOCAL_PROVISIONING_TOKEN,
      restartDelayMs: RESTART_DELAY_MS,
    }),
  });
  context.cleanup.push(() => stopChild(fleet, () => fleet.process.send({ type: "stop" })));
  const progress: FleetProgress = { restartedAt: new Map(), inventoryAt: new Map(), discoveries: [], startedAt: Date.now(), refused: 0, lastRefusal: undefined };
  fleet.process.on("message", (report: FleetReport) => {
    if (report.type !== "restarted") return;
    for (const [identity, at] of report.inventory) progress.inventoryAt.set(identity, at);
    for (const [identity, at] of report.nodes) progress.restartedAt.set(identity, at);
    progress.discoveries.push(...report.discoveries);
    progress.refused += report.refused;
    progress.lastRefusal = report.lastRefusal ?? progress.lastRefusal;
  });
  const ready = await waitForMessage<Extract<FleetReport, { type: "ready" }>>(fleet, "ready", 120_000);
  progress.startedAt = ready.startedAt;
  return { fleet, progress };
}

/** Reads the CPU time of the fleet, nats-server and DynamoDB Local now; the returned function gives what each used since. */
function otherProcessesCpu(fleetPid: number, natsPid: number | undefined, dynamoDbPid: number | undefined) {
  const fleetCpu = () => cpuSeconds(procStat(fleetPid));
  const natsCpu = () => cpuSeconds(natsPid === undefined ? undefined : procStat(natsPid));
  const dynamoCpu = () => cpuSeconds(dynamoDbPid === undefined ? undefined : procStat(dynamoDbPid));
  const before = { fleet: fleetCpu(), nats: natsCpu(), dynamo: dynamoCpu() };
  return () => ({ fleetCpu: fleetCpu() - before.fleet, natsCpu: natsCpu() - before.nats, dynamoDbCpu: dynamoCpu() - before.dynamo });
}

type Admit = (identity: string, admission: Admission) => void;

/** Every admission per host (a host admitted again has several). */
function admissionLog(): { admittedAt: Map<string, Admission[]>; admit: Admit } {
  const admittedAt = new Map<string, Admission[]>();
  const admit: Admit = (identity, admission) => {
    const times = admittedAt.get(identity) ?? [];
    times.push(admission);
    admittedAt.set(identity, times);
  };
  return { admittedAt, admit };
}

/** The provisioner under test, started and ready to work. */
interface StartedProvisioner {
  child: Child;
  /** Ours, profiled: where its --cpu-prof file goes. */
  profileDir?: string;
  /** Ours: takes the admissions the queue has seen since the last read. */
  readAdmissionsNow: () => void;
}

async function startGoSide(context: RunContext, admit: Admit): Promise<StartedProvisioner> {
  const { spec, shared, helperCommand, workDir, nats, cleanup } = context;
  const signer = ed25519SigningKey(context.seed);
  await waitForQuietMachine();
  const provisioner = await startGo(spec, shared.goBin as string, helperCommand, workDir, nats.url, signer.alg === "EdDSA" ? signer.publicKeyHex : "", admit);
  cleanup.push(() => stopChild(provisioner, () => provisioner.process.kill("SIGTERM")));
  return { child: provisioner, readAdmissionsNow: () => undefined };
}

/** Ours (bench/peer-ours.ts) with its own fauxqs, whose message spy gives the admission times. */
async function startOursSide(context: RunContext, admit: Admit): Promise<StartedProvisioner> {
  const { spec, shared, workDir, nats, cleanup } = context;
  const sqs = await startSqs({ spy: true });
  cleanup.push(() => sqs.stop());
  // Admissions as they land in the host-work queue (the message carries its admission time).
  const readAdmissions = () => {
    for (const message of sqs.spy.take()) {
      if (message.status !== "published" || !message.queueName.endsWith("-host-work")) continue;
      const work = JSON.parse(message.body) as { identity?: unknown; admittedAt?: unknown; source?: unknown };
      if (typeof work.identity === "string" && typeof work.admittedAt === "number") {
        admit(work.identity, { at: work.admittedAt, ...(typeof work.source === "string" ? { source: work.source } : {}) });
      }
    }
  };
  const spying = setInterval(readAdmissions, 200);
  cleanup.push(async () => clearInterval(spying));
  const profileDir = spec.profile ? join(workDir, "profile") : undefined;
  const settings: OursSettings = {
    natsUrl: nats.url,
    natsPort: nats.port,
    dynamoDbUrl: shared.dynamoDbUrl,
    sqsUrl: sqs.url,
    signerSeedHex: encodeHex(context.seed),
    maxConcurrency: spec.setting.maxConcurrency ?? OURS_DEFAULT.maxConcurrency,
    workers: spec.setting.workers,
    helper: context.helperCommand,
  };
  const ours = spawnTs(shared.oursBundle, { PEER_OURS: JSON.stringify(settings) }, profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []);
  cleanup.push(() => stopChild(ours, () => ours.process.send({ type: "stop" }), 30_000));
  await waitForMessage(ours, "ready", 120_000);
  await waitForQuietMachine();
  return { child: ours, ...(profileDir ? { profileDir } : {}), readAdmissionsNow: readAdmissions };
}

/** Sets the provisioner to work and waits until every node restarted or the run's bound passed; throws when it exited first. */
async function awaitRestarts(
  context: RunContext,
  provisioner: StartedProvisioner,
  progress: FleetProgress,
  admittedAt: Map<string, Admission[]>,
  timeoutMs: number,
): Promise<void> {
  const { spec } = context;
  if (spec.side === "ours") provisioner.child.process.send({ type: "start" });
  const startedAt = Date.now();

  let exitedEarly: number | null | undefined;
  void provisioner.child.exited.then((code) => (exitedEarly = code));
  let lastLine = startedAt;
  while (progress.restartedAt.size < spec.nodes && Date.now() - startedAt < timeoutMs && exitedEarly === undefined) {
    await new Promise((done) => setTimeout(done, 250));
    if (Date.now() - lastLine >= 10_000) {
      lastLine = Date.now();
      process.stdout.write(`  ${((lastLine - startedAt) / 1000).toFixed(0)}s admitted ${admittedAt.size} restarted ${progress.restartedAt.size}/${spec.nodes} refused ${progress.refused} load ${(loadavg()[0] ?? 0).toFixed(2)}\n`);
    }
  }
  // The last fleet report may still be in flight.
  await new Promise((done) => setTimeout(done, 300));
  provisioner.readAdmissionsNow();
  if (exitedEarly !== undefined) throw new Error(`the ${spec.side} provisioner exited (${exitedEarly}) ${((Date.now() - startedAt) / 1000).toFixed(0)} s into the run`);
}

/** Ours' per-host timestamps with the fleet's, as stages (also printed). */
async function oursStages(provisioner: Child, progress: FleetProgress): Promise<StageBreakdown> {
  const asked = waitForMessage<Extract<OursReport, { type: "stages" }>>(provisioner, "stages", 30_000);
  provisioner.process.send({ type: "stages" });
  const reply = await asked;
  const hosts = new Map(reply.hosts);
  for (const [identity, stamps] of hosts) {
    stamps.inventoryAt = progress.inventoryAt.get(identity);
    stamps.restartAt = progress.restartedAt.get(identity);
  }
  const stages = breakdown(hosts, progress.restartedAt.size, new Map(reply.dynamoDb));
  process.stdout.write(`${stagesTable(stages).map((line) => `  ${line}`).join("\n")}\n`);
  return stages;
}

/** Stops ours, so node writes the --cpu-prof file, and summarises the profile. */
async function stopAndSummariseProfile(provisioner: Child, profileDir: string): Promise<ProfileEntry[] | undefined> {
  await stopChild(provisioner, () => provisioner.process.send({ type: "stop" }), 30_000);
  const file = (await readdir(profileDir)).find((name) => name.endsWith(".cpuprofile"));
  return file ? summariseProfile(JSON.parse(await readFile(join(profileDir, file), "utf8")) as CpuProfile, 20) : undefined;
}

/** What runOnce measured, in seconds of CPU and bytes of memory. */
interface Measured {
  provisionerCpu: number;
  helperCpu: number;
  fleetCpu: number;
  natsCpu: number;
  dynamoDbCpu: number;
  benchmarkCpu: number;
  peakMemory: number;
  load: { start: number; samples: number[]; after: number };
  stealPct: number;
  /** When the run stopped waiting for restarts. */
  endedAt: number;
  profileTop: ProfileEntry[] | undefined;
  stages: StageBreakdown | undefined;
}

function runResult(
  spec: RunSpec,
  run: { setting: string; timeoutMs: number; progress: FleetProgress; admittedAt: Map<string, Admission[]> },
  measured: Measured,
): RunResult {
  const { restartedAt, refused, lastRefusal } = run.progress;
  const { provisionerCpu, helperCpu, load, profileTop, stages } = measured;
  const { latencies, activeSeconds } = admissionToRestart(restartedAt, run.admittedAt);
  const provisioned = restartedAt.size;
  const perHost = (seconds: number) => (provisioned > 0 ? Math.round((seconds / provisioned) * 10_000) / 10 : 0);
  return {
    side: spec.side,
    fleet: spec.fleet,
    nodes: spec.nodes,
    setting: run.setting,
    config: spec.config,
    helper: spec.helper,
    ...(spec.pair ? { pair: spec.pair } : {}),
    complete: provisioned >= spec.nodes,
    timeout_s: run.timeoutMs / 1000,
    restarted: provisioned,
    provisioned,
    refused_requests: refused,
    ...(spec.side === "ours" ? { sdk_slow_requests: sdkSlowRequests } : {}),
    ...(lastRefusal === undefined ? {} : { last_refusal: lastRefusal }),
    seconds_first_admission_to_last_restart: round2(activeSeconds),
    hosts_per_min: activeSeconds > 0 ? Math.round((provisioned / activeSeconds) * 60) : 0,
    admission_to_restart_ms: percentiles(latencies),
    discovery_to_restart_ms: percentiles(discoveryToRestart(restartedAt, run.admittedAt, run.progress.discoveries, run.progress.startedAt)),
    ...admissionFigures(run.progress, run.admittedAt, spec.nodes, measured.endedAt),
    start_load: round2(load.start),
    steal_pct: measured.stealPct,
    cpu_s: {
      provisioner: round2(provisionerCpu),
      helpers_reaped: round2(helperCpu),
      fleet: round2(measured.fleetCpu),
      nats_server: round2(measured.natsCpu),
      dynamodb_local: round2(measured.dynamoDbCpu),
      benchmark_process: round2(measured.benchmarkCpu),
    },
    cpu_ms_per_host: perHost(provisionerCpu),
    helper_cpu_ms_per_host: perHost(helperCpu),
    peak_memory_mb: round2(measured.peakMemory / (1024 * 1024)),
    load_average_1m: { start: round2(load.start), max: round2(Math.max(...load.samples)), after: round2(load.after), samples: load.samples.map(round2) },
    ...(profileTop ? { profile_top: profileTop } : {}),
    ...(stages ? { stages } : {}),
  };
}

/** Each host's first admission: per second from the first discovery broadcast, and the longest gap while hosts waited. */
function admissionFigures(progress: FleetProgress, admittedAt: Map<string, Admission[]>, nodes: number, endedAt: number): Pick<RunResult, "admission_timeline" | "longest_admission_gap_s"> {
  const firsts = [...admittedAt.values()].map((admissions) => (admissions[0] as Admission).at);
  const firstDiscovery = progress.discoveries.length > 0 ? Math.min(...progress.discoveries) : undefined;
  const origin = firstDiscovery ?? Math.min(...firsts);
  return {
    admission_timeline: Number.isFinite(origin) ? admissionTimeline(firsts, origin) : [],
    longest_admission_gap_s: longestAdmissionGapS(firsts, nodes, firstDiscovery, endedAt),
  };
}

/** Per host, the time from its last admission before its restart to the restart; and the span from the first admission to the last restart. */
function admissionToRestart(restartedAt: Map<string, number>, admittedAt: Map<string, Admission[]>): { latencies: number[]; activeSeconds: number } {
  const latencies: number[] = [];
  for (const [identity, restart] of restartedAt) {
    const last = (admittedAt.get(identity) ?? []).filter((admission) => admission.at <= restart).at(-1);
    if (last !== undefined) latencies.push(restart - last.at);
  }
  const firstAdmission = Math.min(...[...admittedAt.values()].map((admissions) => admissions[0]?.at ?? Infinity));
  const lastRestart = Math.max(...restartedAt.values());
  const activeSeconds = Number.isFinite(firstAdmission) && Number.isFinite(lastRestart) ? (lastRestart - firstAdmission) / 1000 : NaN;
  return { latencies, activeSeconds };
}

/**
 * The Go provisioner's two files: its own YAML (the keys config/config.go reads) and the Choria
 * client config it connects with. `choria_insecure` makes it speak protocol v1 without TLS or
 * request signing, as this project's local stack does; `leader_election: false` so it works at once.
 * loglevel info: its "Adding <identity> to the work queue" lines are the admission times.
 */
async function startGo(spec: RunSpec, bin: string, helper: string, workDir: string, natsUrl: string, signerPublicHex: string, admit: Admit): Promise<Child> {
  const signingKey = join(workDir, "server-jwt-signing.seed");
  await writeFile(signingKey, encodeHex(generateEd25519Seed()), { mode: 0o600 });
  const config = [
    `workers: ${spec.setting.workers}`,
    "interval: 1m",
    "logfile: stdout",
    "loglevel: info",
    `helper: ${helper}`,
    `token: ${LOCAL_PROVISIONING_TOKEN}`,
    "choria_insecure: true",
    "site: peerbench",
    "leader_election: false",
    "features:",
    "  jwt: true",
    "  ed25519: true",
    `jwt_verify_cert: "${signerPublicHex}"`,
    `jwt_signing_key: ${signingKey}`,
    "",
  ].join("\n");
  const clientConfig = [
    `plugin.choria.middleware_hosts = ${natsUrl}`,
    "identity = choria_provisioner.peerbench",
    "plugin.choria.use_srv = false",
    "loglevel = info",
    "",
  ].join("\n");
  await writeFile(join(workDir, "provisioner.yaml"), config);
  await writeFile(join(workDir, "client.conf"), clientConfig);
  const go = spawnChild(bin, ["run", "--config", join(workDir, "provisioner.yaml"), "--choria-config", join(workDir, "client.conf")], {}, { cwd: workDir });
  const adding = /Adding (\S+) to the work queue/;
  const problems: string[] = [];
  createInterface({ input: go.process.stdout as NodeJS.ReadableStream }).on("line", (line) => {
    const match = adding.exec(line);
    if (match?.[1]) admit(match[1], { at: Date.now() });
    else if (/level=(error|fatal)/.test(line) && problems.length < 5) problems.push(line);
  });
  go.process.stderr?.on("data", (chunk: Buffer) => process.stderr.write(`  [go] ${chunk.toString()}`));
  void go.exited.then((code) => {
    if (code !== 0 && code !== null) process.stderr.write(`  [go] exited ${code}: ${problems.join(" | ")}\n`);
  });
  const report = setInterval(() => {
    if (problems.length > 0) process.stderr.write(`  [go] ${problems.splice(0).join("\n  [go] ")}\n`);
  }, 5_000);
  void go.exited.then(() => clearInterval(report));
  return go;
}

function realFleetUnavailable(goBin: string | undefined): string | undefined {
  if (options.realFleetNodes === 0) return "--real-fleet 0";
  if (process.getuid?.() !== 0) return "the real fleet needs root (each server runs in its own UTS and mount namespace)";
  if (!goBin) return "no Go provisioner binary";
  const build = spawnSync("bash", [join(REPO_ROOT, "scripts/peers/build-choria.sh")], { encoding: "utf8" });
  if (build.status !== 0) return `scripts/peers/build-choria.sh failed: ${(build.stderr || build.stdout).trim().split("\n").slice(-3).join(" ")}`;
  return undefined;
}

/** The two sides on the real go-choria fleet, alternated: Go at --go-workers, ours at the product's defaults. */
async function realFleetComparison(goBin: string | undefined): Promise<RealFleetReport> {
  const reason = realFleetUnavailable(goBin);
  if (reason) {
    process.stdout.write(`\nreal fleet not run: ${reason}\n`);
    return { run: false, reason };
  }
  const runs: RealFleetRun[] = [];
  const timeoutS = options.timeoutS ?? 300;
  for (let round = 1; round <= options.realFleetRounds; round++) {
    for (const side of ["go", "ours"] as const) {
      process.stdout.write(`\n== ${side} on the real fleet: ${options.realFleetNodes} go-choria servers, round ${round}/${options.realFleetRounds}\n`);
      await waitForQuietMachine();
      const run = await runRealFleet(REPO_ROOT, { side, nodes: options.realFleetNodes, goBin, goWorkers: options.goWorkers, ours: OURS_DEFAULT, timeoutS });
      process.stdout.write(`  ${run.provisioned}/${run.nodes} in ${run.seconds ?? "-"} s, load ${run.load_average_1m.start} at start${run.problem ? `; ${run.problem}` : ""}\n`);
      runs.push(run);
    }
  }
  return { run: true, runs, summary: summariseRealFleet(runs, CORES) };
}

const STAGES_HEADER = `# Where one host's time goes (ours, emulated pipeline)

Each section is one \`npm run bench:peer\` run, appended by it (newest last), so a change to the
pipeline shows which stage it moved. Per host, from timestamps taken where each step lands (see
bench/stages.ts): the host-work message's admission time, SQS's SentTimestamp, the emulated event
source handing the batch to an invocation and the invocation returning, the engine starting the host
(lease round and claim done) and sending \`configure\` (helper done), and the simulated node's own
record of answering \`inventory\` and acknowledging \`restart\`. DynamoDB round trips are timed at the
local stack's counting proxy in front of DynamoDB Local (from 2026-12-03: in ours' process, from its
HTTP client's diagnostics channels, with no proxy in between). The 1-minute load average at each
run's start and the CPU steal over it are given: figures from a run that started above the start
gate (bench/peer.ts) describe a busy machine.
`;

/** Appends this benchmark's per-stage figures (every run of ours) to pipeline-stages.md in the report directory. */
async function appendStages(report: Report): Promise<void> {
  const path = join(options.reportDir, "pipeline-stages.md");
  const existing = existsSync(path) ? await readFile(path, "utf8") : STAGES_HEADER;
  const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO_ROOT, encoding: "utf8" }).stdout.trim();
  // The reports this run has just written are not changes to what was measured.
  const dirty = spawnSync("git", ["status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports"], { cwd: REPO_ROOT, encoding: "utf8" }).stdout.trim() !== "";
  // An exported copy of a commit (no .git) has no commit to name: the label says which.
  const where = commit ? `, commit ${commit}${dirty ? " with uncommitted changes" : ""}` : "";
  const lines = ["", `## ${options.label ?? (commit ? `commit ${commit}` : "unlabelled run")}`, "", `${report.generated}${where}, Node ${report.node}, ${report.cpus} cores.`];
  for (const r of report.runs) {
    if (!r.stages) continue;
    lines.push(
      "",
      `### ${r.fleet}, ${r.setting} (${r.config}), ${r.helper} helper${r.pair ? `, pair ${r.pair}` : ""}${r.profile_top ? " (profiled)" : ""}: ${r.restarted}/${r.nodes} restarted, ${r.hosts_per_min} hosts/min, load ${r.load_average_1m.start} at start (max ${r.load_average_1m.max}), steal ${r.steal_pct} %`,
      "",
      ...stagesTable(r.stages),
    );
  }
  await writeFile(path, `${existing.trimEnd()}\n${lines.join("\n")}\n`);
}

/** Moves `pid`, every thread it has, to `cpu`; what it starts from then on inherits that. */
function pin(pid: number, cpu: string): void {
  const result = spawnSync("taskset", ["-a", "-p", "-c", cpu, String(pid)], { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`cannot pin process ${pid} to CPU ${cpu}: taskset ${result.error?.message ?? result.stderr.trim()}`);
}

/** DynamoDB Local, the store-delay proxy when asked for, and the helpers; `work` runs with them and they stop after. */
async function withServices<T>(goBin: string | undefined, work: (shared: Shared) => Promise<T>): Promise<T> {
  const dynamoDb = await startDynamoDbLocal();
  // In this process, so its CPU is not ours'.
  const proxy = options.storeDelayMs > 0 ? await startCountingProxy({ target: dynamoDb.url, delayMs: options.storeDelayMs }) : undefined;
  try {
    const oursBundle = await bundleOurs(REPO_ROOT);
    return await work({ dynamoDb, dynamoDbUrl: proxy?.url ?? dynamoDb.url, goBin, helpers: availableHelpers(), oursBundle });
  } finally {
    await proxy?.stop();
    await dynamoDb.stop();
  }
}

async function main(): Promise<void> {
  options = parsePeerOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(PEER_USAGE);
    return;
  }
  if (options.markdownOnly) return rewriteFromRecordedRuns();
  if (options.standInsApart) {
    if (CORES < 2) throw new UsageError(`bench:peer: --stand-ins-apart needs 2 CPUs, this machine has ${CORES}`);
    pin(process.pid, STAND_INS_CPU);
  }
  const started = Date.now();
  if (options.noCliffNodes !== undefined) return noCliff(options.noCliffNodes);
  const go = goProvisioner();
  if (go.reason) process.stdout.write(`Go provisioner unavailable: ${go.reason}\n`);
  if (options.realFleetOnly) return rerunRealFleet(go.bin, started);
  const { pairs, runs } = await withServices(go.bin, (shared) => runAllPairs(shared));
  const report: Report = {
    generated: new Date().toISOString(),
    wall_seconds: 0,
    cpus: CORES,
    cpu_model: cpuModel(),
    node: process.version,
    go_provisioner: { binary: go.bin ?? null, ...(go.reason ? { unavailable_reason: go.reason } : {}) },
    settings: {
      pairs: options.pairs,
      go_workers: options.goWorkers,
      ours_default: `${OURS_DEFAULT.maxConcurrency} x ${OURS_DEFAULT.workers}`,
      ours_tuned: options.tuned ? `${options.tuned.maxConcurrency} x ${options.tuned.workers}` : null,
      max_start_load: options.maxStartLoad,
      max_steal_pct: options.maxSteal,
      load_wait_s: options.loadWaitS,
      warm_up_nodes: options.warmUpNodes,
      store_delay_ms: options.storeDelayMs,
      stand_ins_apart: options.standInsApart,
    },
    real_fleet: await realFleetComparison(go.bin),
    fleets: summarise(pairs),
    runs,
  };
  report.wall_seconds = (Date.now() - started) / 1000;
  await writeReport(report);
  await appendStages(report);
  process.stdout.write(`\nwrote peer.json, peer.md and a section of pipeline-stages.md in ${options.reportDir} (${report.wall_seconds.toFixed(0)} s)\n`);
  for (const { pairs: _pairs, ...f } of report.fleets) process.stdout.write(`${JSON.stringify(f)}\n`);
}

async function writeReport(report: Report): Promise<void> {
  await mkdir(options.reportDir, { recursive: true });
  await writeFile(recordedReportPath(), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(options.reportDir, "peer.md"), markdown(report));
}

const recordedReportPath = () => join(options.reportDir, "peer.json");

/** The recorded report `option` works on, read before anything runs: missing, not JSON or without pairs is a usage mistake. */
function readRecordedReport(option: string): Report {
  const path = recordedReportPath();
  const mistake = (what: string, cause?: unknown) =>
    new UsageError(`bench:peer: ${option} works on ${path}, which ${what}: run \`npm run bench:peer\` with the same --report-dir first`, { cause });
  const recorded = recordedJson(path, (_what, detail, cause) => mistake(detail, cause)) as Report;
  if (!Array.isArray(recorded.fleets) || recorded.fleets.some((f) => !Array.isArray(f.pairs))) throw mistake("has no pairs recorded per fleet");
  return recorded;
}

/** `--markdown-only`: peer.md, and the fleet summaries in peer.json, again from the recorded pairs. */
async function rewriteFromRecordedRuns(): Promise<void> {
  const recorded = readRecordedReport("--markdown-only");
  await writeReport({ ...recorded, fleets: summarise(recorded.fleets.flatMap((f) => f.pairs)) });
  process.stdout.write(`rewrote peer.md and the fleet summaries in peer.json from its pairs, in ${options.reportDir}\n`);
}

/** `--real-fleet-only`: the real fleet again, into the recorded report. */
async function rerunRealFleet(goBin: string | undefined, started: number): Promise<void> {
  const report: Report = { ...readRecordedReport("--real-fleet-only"), real_fleet: await realFleetComparison(goBin) };
  await writeReport(report);
  process.stdout.write(`\nwrote the real fleet into peer.json and peer.md in ${options.reportDir} (${((Date.now() - started) / 1000).toFixed(0)} s): ${JSON.stringify(report.real_fleet.summary ?? report.real_fleet.reason)}\n`);
}

/** The helpers asked for that this machine has: bash always, the compiled one if it builds. */
function availableHelpers(kinds: readonly HelperKind[] = options.helpers): Shared["helpers"] {
  const helpers: Shared["helpers"] = { bash: kinds.includes("bash") ? HELPERS.bash : undefined, compiled: undefined };
  if (kinds.includes("compiled")) {
    try {
      helpers.compiled = buildCompiledHelper();
    } catch (error) {
      process.stdout.write(`compiled helper unavailable: ${error instanceof Error ? error.message : String(error)}\n`);
    }
  }
  return helpers;
}

const oursSettingOf = (config: OursConfig): OursSetting => (config === "tuned" && options.tuned ? options.tuned : OURS_DEFAULT);

/**
 * Every measured run: a warm-up of both sides, then per size, helper and config the pair slots,
 * each run again while a gate refuses it (at most EXTRA_ATTEMPTS more times); then ours profiled.
 */
async function runAllPairs(shared: Shared): Promise<{ pairs: Pair[]; runs: RunResult[] }> {
  const pairs: Pair[] = [];
  const runs: RunResult[] = [];
  const helpers = options.helpers.filter((kind) => shared.helpers[kind] !== undefined);
  if (!shared.goBin || helpers.length === 0) {
    process.stdout.write(`\nno pairs: ${!shared.goBin ? "no Go provisioner" : "none of the helpers asked for is available"}\n`);
    return { pairs, runs };
  }
  await warmUp(shared, helpers[0] as HelperKind, ["go", "ours"]);
  const configs: OursConfig[] = options.tuned ? ["default", "tuned"] : ["default"];
  for (const nodes of options.sizes) {
    for (const helper of helpers) {
      for (const config of configs) {
        for (let slot = 1; slot <= options.pairs; slot++) {
          for (let attempt = 1; attempt <= 1 + EXTRA_ATTEMPTS; attempt++) {
            const where = { fleet: `simulator-${nodes}`, helper, config, slot, attempt };
            const [go, ours] = await runPair(shared, nodes, where);
            const pair = pairOf(where, go, ours, { maxStartLoad: options.maxStartLoad, maxSteal: options.maxSteal });
            pairs.push(pair);
            runs.push(go, ours);
            process.stdout.write(`  pair ${helper}/${config}/${slot}.${attempt}: ratio ${pair.ratio}${pair.counted ? "" : ` (${pair.refused ? `refused: ${pair.refused}` : `not counted: ${pair.not_counted}`})`}\n`);
            if (!pair.refused) break;
          }
        }
      }
    }
  }
  if (options.profile) {
    const nodes = options.sizes[0] as number;
    const spec: RunSpec = { side: "ours", fleet: `simulator-${nodes}`, nodes, setting: OURS_DEFAULT, config: "default", helper: helpers[0] as HelperKind, profile: true };
    runs.push(await runOnce(spec, shared));
  }
  return { pairs, runs };
}

/** One pair: Go and ours on the same size, helper and config, in the slot's order (ABBA). */
async function runPair(shared: Shared, nodes: number, where: { fleet: string; helper: HelperKind; config: OursConfig; slot: number; attempt: number }): Promise<[RunResult, RunResult]> {
  const pair = `${where.helper}/${where.config}/${where.slot}.${where.attempt}`;
  const common = { fleet: where.fleet, nodes, helper: where.helper, config: where.config, pair };
  const go = () => runOnce({ ...common, side: "go", setting: { workers: options.goWorkers } }, shared);
  const ours = () => runOnce({ ...common, side: "ours", setting: oursSettingOf(where.config) }, shared);
  if (orderOf(where.slot) === "go-first") {
    const goRun = await go();
    return [goRun, await ours()];
  }
  const oursRun = await ours();
  return [await go(), oursRun];
}

/** Unreported runs on a warm-up fleet (DynamoDB Local's JVM, page cache, the helpers' first start), for each side asked, in order. */
async function warmUp(shared: Shared, helper: HelperKind, sides: readonly Side[]): Promise<void> {
  if (options.warmUpNodes === 0) return;
  process.stdout.write(`\nwarm-up (not reported): ${sides.join(" then ")} on ${options.warmUpNodes} nodes`);
  for (const side of sides) {
    const setting = side === "go" ? { workers: options.goWorkers } : OURS_DEFAULT;
    await runOnce({ side, fleet: "warm-up", nodes: options.warmUpNodes, setting, config: "default", helper }, shared);
  }
}

/** `--no-cliff <nodes>`: ours alone (default config, compiled helper) once, merged into the recorded peer.json. */
async function noCliff(nodes: number): Promise<void> {
  const recorded = readRecordedReport("--no-cliff");
  const run = await withServices(undefined, async (shared) => {
    if (!shared.helpers.compiled) throw new Error("--no-cliff runs the compiled helper, which is unavailable here");
    await warmUp(shared, "compiled", ["ours"]);
    return runOnce({ side: "ours", fleet: `no-cliff-${nodes}`, nodes, setting: OURS_DEFAULT, config: "default", helper: "compiled" }, shared);
  });
  const timeline = run.admission_timeline;
  const result: NoCliff = {
    generated: new Date().toISOString(),
    nodes,
    store_delay_ms: options.storeDelayMs,
    admission_seconds: admissionSeconds(timeline),
    longest_admission_gap_s: run.longest_admission_gap_s,
    every_host_restarted: run.complete,
    restarted: run.restarted,
    hosts_per_min: run.hosts_per_min,
    start_load: run.start_load,
    steal_pct: run.steal_pct,
    admission_timeline: timeline,
  };
  await writeReport({ ...recorded, no_cliff: result });
  process.stdout.write(`\nwrote no_cliff into peer.json and peer.md in ${options.reportDir}: ${JSON.stringify({ ...result, admission_timeline: undefined })}\n`);
}

/** Seconds from the first admitted second to the last, from the per-second timeline. */
function admissionSeconds(timeline: readonly number[]): number {
  const first = timeline.findIndex((count) => count > 0);
  const last = timeline.findLastIndex((count) => count > 0);
  return first < 0 ? 0 : last - first + 1;
}

runBenchmark("peer benchmark", main);
