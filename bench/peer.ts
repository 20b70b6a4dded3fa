/**
 * Side-by-side benchmark: the Go Choria Provisioner (choria-io/provisioner, built by
 * scripts/peers/build-provisioner.sh) and this project, in one run, in turn on a fresh fleet, with
 * the same bash helper (examples/helpers/provision-helper.sh) and the same features (jwt + ed25519).
 *
 *   npm run bench:peer                 writes reports/peer.json and reports/peer.md
 *   npm run bench:peer -- --help       its options (bench/peer-options.ts); starts nothing
 *   npm run bench:peer -- --sizes 1000 --go-workers 8,32 --ours 5x10   (smaller sweep)
 *   CHORIA_PROVISIONER_BIN=/path/to/provisioner npm run bench:peer      (a Go binary built elsewhere)
 *
 * Every run gets its own nats-server and a fresh simulated fleet in a process of its own
 * (bench/peer-fleet.ts): a node holds its provisioning lock for 2 minutes per caller, so the two
 * provisioners never share a fleet. The provisioner under test is one process: the Go binary, or
 * bench/peer-ours.ts (the real handlers under the emulated Lambda runtime). Its CPU comes from
 * /proc/<pid>/stat (utime + stime, from the start of the run to the last node's restart; ours' with
 * its helper launcher process), its peak memory from VmHWM; reaped helper processes are reported
 * apart (cutime + cstime). The fleet,
 * nats-server, DynamoDB Local and fauxqs run in other processes and are not counted.
 *
 * The sweep (Go `workers`; ours provision concurrency x workers) runs at the first size; the larger
 * sizes run each side's best setting from it. Every fleet is run with the bash + jq helper and,
 * with each side's best setting, the compiled helper (bench/helpers/compiled). A real go-choria fleet is used when the real-fleet
 * harness (dev/local/real-fleet.ts) is present; otherwise the report says it was not run.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { encodeHex } from "../lib/crypto/encoding";
import { ed25519SigningKey, generateEd25519Seed } from "../test/support/choria-node/keys";
import { startDynamoDbLocal, startNats, startSqs, type RunningDynamoDb, type RunningNats } from "../dev/local/services";
import { HELPERS, LOCAL_PROVISIONING_TOKEN } from "../dev/local/stack";
import { buildCompiledHelper } from "./compiled-helper";
import { childPids, cpuSeconds, percentile, procMemory, procStat, round2, sumStats, summariseProfile, type CpuProfile, type ProfileEntry } from "./measure";
import type { FleetReport } from "./peer-fleet";
import { parsePeerOptions, PEER_USAGE, PeerOptionsError, type PeerOptions } from "./peer-options";
import type { OursReport, OursSettings } from "./peer-ours";
import { realFleetMarkdown, runRealFleet, summariseRealFleet, type RealFleetReport, type RealFleetRun } from "./peer-realfleet";
import { best, summarise, type FleetSummary, type HelperKind, type Side } from "./peer-summary";
import { breakdown, stagesTable, type StageBreakdown } from "./stages";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const REPO_ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
let options: PeerOptions;
try {
  options = parsePeerOptions(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof PeerOptionsError)) throw error;
  process.stderr.write(`${error.message}\n\n${PEER_USAGE}`);
  process.exit(2);
}
if (options.help) {
  process.stdout.write(PEER_USAGE);
  process.exit(0);
}
const SIZES = options.sizes;
const GO_WORKERS = options.goWorkers;
const OURS_SETTINGS = options.oursSettings;
const PROFILE = options.profile;
const CORES = cpus().length;
/** How often the load average is sampled through a run. */
const LOAD_SAMPLE_MS = 5_000;
/**
 * How the committed report's Go binary was obtained (a fact about that run, not a figure: re-check
 * when re-measuring). Shown when the binary did not come from scripts/peers/build-provisioner.sh.
 */
const RUN_NOTES =
  'On the machine that made the committed report the Go module proxy answered 403 "This module version is not available" for github.com/choria-io/provisioner at every version asked (the pinned pseudo-version, v0.16.0, latest), so scripts/peers/build-provisioner.sh stopped there; the binary was built outside the repository from the source of the pinned commit with the script\'s `-ldflags`, its dependencies (go-choria v0.30.0 and the rest of its go.sum) from the module proxy.';
/**
 * A check made after the committed run (2026-12-01; re-check when re-measuring): the simulator
 * became stricter on main (provisioning settings read from provisioning.jwt as go-choria does, the
 * JWT as the NATS token, Go's boolean parsing, configure's file re-read).
 */
const STRICT_SIMULATOR_MERGED = "2026-12-01T08:33:00Z";
const SIMULATOR_NOTE =
  "The figures above were taken on the simulator as it was before its strictness rules (refusing requests a real server refuses) were merged; on the stricter simulator a 50-node run of each side (`PEER_SIZES=50`) restarted every host with no request of the Go provisioner refused or dropped.";
/** What scripts/peers/build-provisioner.sh pins. */
const PROVISIONER_PIN = "v0.16.1-0.20260516145817-aca2b6263842 (commit aca2b62)";
const RESTART_DELAY_MS = 2_000;
const timeoutFor = (nodes: number) => (options.timeoutS ?? Math.max(180, 120 + nodes * 0.1)) * 1000;
/** Nodes of the unmeasured first run that warms DynamoDB Local's JIT (the first run through a fresh JVM is several times slower). */
const WARM_UP_NODES = options.warmUpNodes;

/** AWS SDK requests of ours that outlived their client timeout (retried by the SDK), this run. */
let sdkSlowRequests = 0;

interface RunSpec {
  side: Side;
  fleet: string;
  nodes: number;
  /** Go: workers. Ours: provision concurrency x workers. */
  setting: { workers: number; maxConcurrency?: number };
  helper: HelperKind;
  profile?: boolean;
}

interface RunResult {
  side: Side;
  fleet: string;
  nodes: number;
  setting: string;
  helper: HelperKind;
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
  admission_to_restart_ms: { p50?: number; p99?: number; max?: number; samples: number };
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

interface Child {
  process: ChildProcess;
  pid: number;
  exited: Promise<number | null>;
}

function spawnChild(command: string, args: string[], env: Record<string, string>, options: { ipc?: boolean; cwd?: string } = {}): Child {
  const child = spawn(command, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  return { process: child, pid: child.pid, exited };
}

/** A TypeScript child run by this Node with the tsx loader, so its pid is the process doing the work. */
function spawnTs(script: string, env: Record<string, string>, nodeFlags: string[] = []): Child {
  const child = spawnChild(process.execPath, [...nodeFlags, "--import", "tsx", join(REPO_ROOT, script)], env, { ipc: true });
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
  goBin: string | undefined;
  helpers: Record<HelperKind, string | undefined>;
}

/**
 * Waits (bounded by --load-wait) for the 1-minute load average to fall to the core count, so a run
 * does not start on a machine busy with other work; the start load is recorded either way and
 * decides whether the run's ratio is reported.
 */
async function waitForQuietMachine(): Promise<void> {
  const until = Date.now() + options.loadWaitS * 1000;
  let said = false;
  while ((loadavg()[0] ?? 0) > CORES && Date.now() < until) {
    if (!said) process.stdout.write(`  waiting up to ${options.loadWaitS} s for the 1-minute load (${(loadavg()[0] ?? 0).toFixed(2)}) to fall to ${CORES}\n`);
    said = true;
    await new Promise((done) => setTimeout(done, 2_000));
  }
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
  process.stdout.write(`\n== ${spec.side}${spec.profile ? " (profiled)" : ""}: ${spec.nodes} nodes (${spec.fleet}), ${setting}, ${spec.helper} helper\n`);
  const timeoutMs = timeoutFor(spec.nodes);
  sdkSlowRequests = 0;
  const workDir = await mkdtemp(join(tmpdir(), `peer-${spec.side}-`));
  const seed = generateEd25519Seed();
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const nats: RunningNats = await startNats();
    cleanup.push(() => nats.stop());
    const context: RunContext = { spec, shared, helperCommand, workDir, seed, nats, cleanup };
    const { fleet, progress } = await startPeerFleet(context);
    const othersCpuSince = otherProcessesCpu(fleet.pid, nats.pid, shared.dynamoDb.pid);
    const admissions = admissionLog();
    // The wait for a quiet machine comes right before a side starts working: Go discovers as soon as
    // it is spawned, ours once told to start (after its start-up).
    const provisioner = spec.side === "go" ? await startGoSide(context, admissions.admit) : await startOursSide(context, admissions.admit);
    const loadStart = loadavg()[0] ?? 0;
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
      profileTop,
      stages,
    });
    process.stdout.write(
      `  -> ${result.provisioned}/${spec.nodes} restarted, ${result.hosts_per_min} hosts/min, p50/p99 ${result.admission_to_restart_ms.p50}/${result.admission_to_restart_ms.p99} ms, ` +
        `${result.cpu_ms_per_host} CPU ms/host (+${result.helper_cpu_ms_per_host} helpers), VmHWM ${result.peak_memory_mb} MB, refused ${progress.refused}${progress.lastRefusal ? ` (last: ${progress.lastRefusal})` : ""}, ` +
        `load ${result.load_average_1m.start} at start (max ${result.load_average_1m.max})${result.load_average_1m.start > CORES ? ` ABOVE ${CORES} cores: no ratio from this run` : ""}\n`,
    );
    return result;
  } finally {
    for (const step of cleanup.reverse()) await step().catch((error: unknown) => process.stderr.write(`cleanup: ${String(error)}\n`));
    await rm(workDir, { recursive: true, force: true });
  }
}

/** What the fleet reported so far: when each node answered inventory and acknowledged its restart, and the requests it refused. */
interface FleetProgress {
  restartedAt: Map<string, number>;
  inventoryAt: Map<string, number>;
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
  const progress: FleetProgress = { restartedAt: new Map(), inventoryAt: new Map(), refused: 0, lastRefusal: undefined };
  fleet.process.on("message", (report: FleetReport) => {
    if (report.type !== "restarted") return;
    for (const [identity, at] of report.inventory) progress.inventoryAt.set(identity, at);
    for (const [identity, at] of report.nodes) progress.restartedAt.set(identity, at);
    progress.refused += report.refused;
    progress.lastRefusal = report.lastRefusal ?? progress.lastRefusal;
  });
  await waitForMessage(fleet, "ready", 120_000);
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

type Admit = (identity: string, at: number) => void;

/** Every admission time per host (a host admitted again has several). */
function admissionLog(): { admittedAt: Map<string, number[]>; admit: Admit } {
  const admittedAt = new Map<string, number[]>();
  const admit = (identity: string, at: number) => {
    const times = admittedAt.get(identity) ?? [];
    times.push(at);
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
      const work = JSON.parse(message.body) as { identity?: unknown; admittedAt?: unknown };
      if (typeof work.identity === "string" && typeof work.admittedAt === "number") admit(work.identity, work.admittedAt);
    }
  };
  const spying = setInterval(readAdmissions, 200);
  cleanup.push(async () => clearInterval(spying));
  const profileDir = spec.profile ? join(workDir, "profile") : undefined;
  const settings: OursSettings = {
    natsUrl: nats.url,
    natsPort: nats.port,
    dynamoDbUrl: shared.dynamoDb.url,
    sqsUrl: sqs.url,
    signerSeedHex: encodeHex(context.seed),
    maxConcurrency: spec.setting.maxConcurrency ?? 5,
    workers: spec.setting.workers,
    helper: context.helperCommand,
    // Go admits every discovered node at once; ours' default bound on new names per discovery
    // (a defence against forged replies) would spread a larger fleet over several intervals.
    newNamesPerInterval: spec.nodes,
  };
  const ours = spawnTs("bench/peer-ours.ts", { PEER_OURS: JSON.stringify(settings) }, profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []);
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
  admittedAt: Map<string, number[]>,
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
  profileTop: ProfileEntry[] | undefined;
  stages: StageBreakdown | undefined;
}

function runResult(
  spec: RunSpec,
  run: { setting: string; timeoutMs: number; progress: FleetProgress; admittedAt: Map<string, number[]> },
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
    helper: spec.helper,
    complete: provisioned >= spec.nodes,
    timeout_s: run.timeoutMs / 1000,
    restarted: provisioned,
    provisioned,
    refused_requests: refused,
    ...(spec.side === "ours" ? { sdk_slow_requests: sdkSlowRequests } : {}),
    ...(lastRefusal === undefined ? {} : { last_refusal: lastRefusal }),
    seconds_first_admission_to_last_restart: round2(activeSeconds),
    hosts_per_min: activeSeconds > 0 ? Math.round((provisioned / activeSeconds) * 60) : 0,
    admission_to_restart_ms: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1), samples: latencies.length },
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

/** Per host, the time from its last admission before its restart to the restart; and the span from the first admission to the last restart. */
function admissionToRestart(restartedAt: Map<string, number>, admittedAt: Map<string, number[]>): { latencies: number[]; activeSeconds: number } {
  const latencies: number[] = [];
  for (const [identity, restart] of restartedAt) {
    const last = (admittedAt.get(identity) ?? []).filter((at) => at <= restart).at(-1);
    if (last !== undefined) latencies.push(restart - last);
  }
  latencies.sort((a, b) => a - b);
  const firstAdmission = Math.min(...[...admittedAt.values()].map((times) => times[0] ?? Infinity));
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
async function startGo(spec: RunSpec, bin: string, helper: string, workDir: string, natsUrl: string, signerPublicHex: string, admit: (identity: string, at: number) => void): Promise<Child> {
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
    if (match?.[1]) admit(match[1], Date.now());
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


interface Report {
  generated: string;
  wall_seconds: number;
  cpus: number;
  node: string;
  go_provisioner: { binary: string | null; unavailable_reason?: string };
  real_fleet: RealFleetReport;
  cut: string[];
  fleets: FleetSummary[];
  runs: RunResult[];
}

function markdown(report: Report): string {
  const lines = [...resultSection(report), ...realFleetMarkdown(report.real_fleet, report.cpus)];
  if (report.cut.length > 0) lines.push("**Cut from the full matrix:** " + report.cut.join("; "), "");
  lines.push(...methodSection(), ...everyRunTable(report.runs), ...cpuPerProcessTable(report.runs));
  lines.push("", "## Findings", "", ...findings(report));
  lines.push(...profileSection(report.runs));
  return `${lines.join("\n")}\n`;
}

/** The ratios per fleet, why a ratio is missing, and which Go binary ran. */
function resultSection(report: Report): string[] {
  const cpu = cpus();
  const lines = ["# Side by side: the Go provisioner and this project", ""];
  lines.push(
    `Generated ${report.generated} by \`npm run bench:peer\` on ${report.cpus} CPU(s) (${cpu[0]?.model ?? "unknown"}), Node ${report.node}; the whole benchmark took ${report.wall_seconds.toFixed(0)} s.`,
    "The machine is shared (1-minute load average per run below): the ratios and CPU per host are the results, absolute rates are not.",
    "",
    "## Result",
    "",
    "| fleet | Go hosts/min (bash + jq) | ours | ratio (goal >= 1) | Go hosts/min (compiled) | ours | ratio (goal >= 2) | Go CPU ms/host | ours CPU ms/host (goal <= Go) | highest start load |",
    "|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const f of report.fleets) {
    lines.push(
      `| ${f.fleet} | ${f.go_hosts_per_min ?? "-"} | ${f.ours_hosts_per_min ?? "-"} | ${f.ratio_hosts_per_min ?? "-"} | ${f.go_hosts_per_min_compiled ?? "-"} | ${f.ours_hosts_per_min_compiled ?? "-"} | ${f.ratio_hosts_per_min_compiled ?? "-"} | ${f.go_cpu_ms_per_host ?? "-"} | ${f.ours_cpu_ms_per_host ?? "-"} | ${f.max_start_load ?? "-"} |`,
    );
  }
  lines.push("", `Each side's best run per fleet and helper (most hosts/min among complete runs). A ratio is given only between two runs that both restarted every node and both started with the 1-minute load at or below the ${report.cpus} cores; \`reports/peer.json\` has every run.`, "");
  for (const f of report.fleets) for (const reason of f.not_comparable ?? []) lines.push(`- **${f.fleet}, no ratio:** ${reason}`);
  if (report.fleets.some((f) => f.not_comparable)) lines.push("");
  if (report.go_provisioner.unavailable_reason) lines.push(`**The Go provisioner was not run:** ${report.go_provisioner.unavailable_reason}`, "");
  const goBinary = report.go_provisioner.binary;
  if (goBinary) {
    const fromScript = goBinary.includes("/choria-peers/bin/") || goBinary.startsWith(process.env.CHORIA_PEERS_DIR ?? "\0");
    lines.push(
      fromScript
        ? `**Go binary:** \`${goBinary}\`, built by scripts/peers/build-provisioner.sh (choria-io/provisioner ${PROVISIONER_PIN} from the Go module proxy).`
        : `**Go binary:** \`${goBinary}\`, given with \`CHORIA_PROVISIONER_BIN\`. ${RUN_NOTES}`,
      "",
    );
  }
  return lines;
}

function methodSection(): string[] {
  return [
    "## How it was measured",
    "",
    "- **Same work**: one nats-server per run (plain, loopback), a fresh simulated fleet (dev/simulator) in its own process, features `jwt` + `ed25519`,",
    "  the bash + jq helper `examples/helpers/provision-helper.sh`, one provisioning token, a provisioning JWT signed by a per-run key, protocol v1",
    "  (`choria_insecure: true` on both sides). Nodes restart 2 s after acknowledging `restart` and come back out of provisioning mode.",
    "- **Go**: `choria-provisioner run` with `leader_election: false`, `interval: 1m`, `loglevel: info` (its admission lines), the swept `workers`.",
    "  It discovers at start, then every minute; each RPC opens its own NATS connection (go-choria's client does).",
    "- **Ours**: bench/peer-ours.ts, one process holding the App and the real handlers under the emulated Lambda runtime (schedules and SQS",
    "  pollers, long-polling 20 s as Lambda's do), AWS timings (1-minute schedules, lease 30 s / 10 s / 5 s), the swept provision concurrency x",
    "  `workers`. DynamoDB Local (a JVM) and fauxqs run in other processes, and the App reaches them directly, as on AWS (no counting proxy).",
    "  Its process also carries the pollers' SQS clients, which AWS would run elsewhere: they are counted against ours. `discovery_new_names_per_interval` is the fleet's",
    "  size: Go admits every discovered node at once, and ours' default (1,000 new names per discovery, a bound on forged replies) would",
    "  admit a 5,000-node fleet over five intervals. DynamoDB Local's JVM runs C1 only with the serial collector (dev/local/services.ts).",
    "- **hosts/min**: restarted hosts / time from the first admission to the last restart acknowledged at a node.",
    "- **admission-to-restart**: per host, from its (last) admission to the node recording the `restart` request. Go: the time its",
    "  `Adding <identity> to the work queue` log line reached the benchmark; ours: `admittedAt` of the host-work message that provisioned it,",
    "  as fauxqs's message spy saw the message arrive in the queue.",
    "- **CPU ms/host**: the provisioner process's utime + stime from `/proc/<pid>/stat`, from the start of the run to the last restart, over",
    "  restarted hosts; for ours with its helper launcher's (a child process that starts the helpers). Helper processes reaped (cutime +",
    "  cstime: Go's own, the launcher's for ours) are shown apart; they are the same script on both sides.",
    "  Not counted: the fleet, nats-server, DynamoDB Local, fauxqs (their figures are in peer.json). Ours is read after its start-up (module",
    "  loading, queue creation), Go's from its spawn.",
    "- **peak memory**: VmHWM of the provisioner process (for ours plus its helper launcher's).",
    "- **bounds**: the sweep runs at the first size only; each run stops at max(180 s, 120 s + 0.1 s per node) (`PEER_TIMEOUT_S`), and a run",
    "  stopped there is marked, its hosts/min over the hosts it did restart. One unmeasured 200-node run of ours first warms DynamoDB Local's JVM.",
    "",
  ];
}

function everyRunTable(runs: RunResult[]): string[] {
  const lines = [
    "## Every run",
    "",
    "| side | fleet | helper | nodes | setting | restarted | hosts/min | p50 ms | p99 ms | CPU ms/host | helpers ms/host | VmHWM MB | DynamoDB Local CPU s | refused | load start / max / after |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    lines.push(
      `| ${r.side}${r.profile_top ? " (profiled)" : ""} | ${r.fleet} | ${r.helper} | ${r.nodes} | ${r.setting} | ${r.provisioned}${r.complete ? "" : ` (stopped at ${r.timeout_s} s)`} | ${r.hosts_per_min} | ${r.admission_to_restart_ms.p50 ?? "-"} | ${r.admission_to_restart_ms.p99 ?? "-"} | ${r.cpu_ms_per_host} | ${r.helper_cpu_ms_per_host} | ${r.peak_memory_mb} | ${r.side === "ours" ? r.cpu_s.dynamodb_local : "-"} | ${r.refused_requests} | ${r.load_average_1m.start} / ${r.load_average_1m.max} / ${r.load_average_1m.after} |`,
    );
  }
  return lines;
}

function cpuPerProcessTable(runs: RunResult[]): string[] {
  const lines = [
    "",
    "## CPU per restarted host in every process (ms)",
    "",
    "What the whole run cost on this machine, for the shortfall analysis: only the provisioner column is the provisioner's figure.",
    "`benchmark` is the benchmark's own process, which hosts fauxqs during ours' runs and reads Go's log lines during Go's.",
    "",
    "| side | fleet | helper | setting | provisioner | helpers | fleet | nats-server | DynamoDB Local | benchmark (fauxqs) | total |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    const per = (seconds: number | undefined) => (seconds === undefined || r.provisioned === 0 ? undefined : Math.round((seconds / r.provisioned) * 10_000) / 10);
    const c = r.cpu_s;
    const parts = [c.provisioner, c.helpers_reaped, c.fleet, c.nats_server, r.side === "ours" ? c.dynamodb_local : 0, c.benchmark_process];
    const total = per(parts.reduce<number>((sum, value) => sum + (value ?? 0), 0));
    lines.push(
      `| ${r.side}${r.profile_top ? " (profiled)" : ""} | ${r.fleet} | ${r.helper} | ${r.setting} | ${parts.map((value, i) => (i === 4 && r.side === "go" ? "-" : (per(value) ?? "-"))).join(" | ")} | ${total ?? "-"} |`,
    );
  }
  return lines;
}

function profileSection(runs: RunResult[]): string[] {
  const profiled = runs.find((r) => r.profile_top);
  if (!profiled?.profile_top) return [];
  const lines = ["", `## Profile of ours (${profiled.nodes} nodes, ${profiled.setting})`, ""];
  lines.push("`node --cpu-prof` of the bench/peer-ours.ts process for the whole run (start-up included), top self time:", "");
  lines.push("| function | location | self ms | % |", "|---|---|---|---|");
  for (const entry of profiled.profile_top) lines.push(`| ${entry.function} | ${entry.location} | ${entry.self_ms} | ${entry.self_percent} |`);
  return lines;
}

const perHost = (r: RunResult, seconds: number) => (r.provisioned > 0 ? Math.round((seconds / r.provisioned) * 10_000) / 10 : 0);

/**
 * What the figures say about each side's limits, computed from the runs (so `--markdown-only`
 * rewrites them from peer.json); the prose names the mechanisms, read from both code bases.
 */
function findings(report: Report): string[] {
  const out: string[] = [];
  const mean = (values: number[]) => (values.length ? Math.round((values.reduce((a, b) => a + b, 0) / values.length) * 10) / 10 : 0);
  const measured = report.runs.filter((r) => !r.profile_top && r.helper === "bash");
  const goRuns = measured.filter((r) => r.side === "go");
  const oursRuns = measured.filter((r) => r.side === "ours");
  if (goRuns.length === 0 || oursRuns.length === 0) return ["Only one side ran; nothing to compare."];
  const loads = report.runs.flatMap((r) => [r.load_average_1m.start, r.load_average_1m.max]);
  const goals = report.fleets.map((f) => {
    const cpuOk = (f.ours_cpu_ms_per_host ?? Infinity) <= (f.go_cpu_ms_per_host ?? -Infinity);
    const ratioText = (ratio: number | null, goal: number, helper: string) =>
      ratio === null ? `no ${helper} ratio (see above)` : `${ratio}x the hosts/min with the ${helper} helper (${ratio >= goal ? "goal met" : `goal of ${goal}x not met`})`;
    return `${f.fleet}: ${ratioText(f.ratio_hosts_per_min, 1, "bash + jq")}, ${ratioText(f.ratio_hosts_per_min_compiled, 2, "compiled")}, CPU/host ${f.ours_cpu_ms_per_host} vs ${f.go_cpu_ms_per_host} ms (${cpuOk ? "at or under Go's: met" : "above Go's: not met"})`;
  });
  out.push(`**Goals.** ${goals.join("; ")}.`, "");

  // The CPU model holds where both sides are CPU-bound and complete: the sweep fleet.
  const sweepFleet = report.fleets[0]?.fleet;
  const goSweep = goRuns.filter((r) => r.fleet === sweepFleet && r.complete);
  const oursSweep = oursRuns.filter((r) => r.fleet === sweepFleet && r.complete);
  const helperGo = mean(goSweep.map((r) => r.helper_cpu_ms_per_host));
  const helperOurs = mean(oursSweep.map((r) => r.helper_cpu_ms_per_host));
  const ownGo = mean(goSweep.map((r) => r.cpu_ms_per_host));
  const ownOurs = mean(oursSweep.map((r) => r.cpu_ms_per_host));
  const dynamo = mean(oursSweep.map((r) => perHost(r, r.cpu_s.dynamodb_local)));
  const bench = mean(oursSweep.map((r) => perHost(r, r.cpu_s.benchmark_process ?? 0)));
  const fleetGo = mean(goSweep.map((r) => perHost(r, r.cpu_s.fleet)));
  const fleetOurs = mean(oursSweep.map((r) => perHost(r, r.cpu_s.fleet)));
  const natsGo = mean(goSweep.map((r) => perHost(r, r.cpu_s.nats_server)));
  const natsOurs = mean(oursSweep.map((r) => perHost(r, r.cpu_s.nats_server)));
  const totalGo = Math.round((ownGo + helperGo + fleetGo + natsGo) * 10) / 10;
  const totalOurs = Math.round((ownOurs + helperOurs + fleetOurs + natsOurs + dynamo + bench) * 10) / 10;
  const ceiling = Math.round((totalGo / (helperOurs + fleetOurs + natsOurs + dynamo + bench)) * 100) / 100;
  if (goSweep.length === 0 || oursSweep.length === 0) {
    out.push(`**CPU per host of a whole run, every process.** Not compared: on ${sweepFleet} ${goSweep.length === 0 ? "Go" : "ours"} had no run that restarted every node within its bound.`, "");
  } else out.push(
    `**CPU per host of a whole run, every process.** The 1-minute load average stayed between ${Math.min(...loads)} and ${Math.max(...loads)} on ${report.cpus} cores through the benchmark, so every process competed with other jobs for CPU (table above). Averaged over the ${sweepFleet} runs, where both sides finished, Go's run costs ${totalGo} ms per host (provisioner ${ownGo}, helper ${helperGo}, fleet ${fleetGo}, nats-server ${natsGo}); ours costs ${totalOurs} (provisioner ${ownOurs}, helper ${helperOurs}, fleet ${fleetOurs}, nats-server ${natsOurs}, DynamoDB Local ${dynamo}, fauxqs and the benchmark ${bench}). The helper is the same bash + jq script on both sides and is the largest share: even a provisioner that cost nothing, with the emulators ours needs, could not beat Go by more than about ${ceiling}x on a saturated machine while Go is CPU-bound too. Where Go is not (the larger fleet, below), the ratio can be higher. The 2x goal needs either CPU to spare (on AWS each Lambda container brings its own, and DynamoDB / SQS are not on this box) or a cheaper helper.`,
    "",
  );

  const profiled = report.runs.find((r) => r.profile_top);
  const spawn = profiled?.profile_top?.find((entry) => entry.function === "ChildProcess.spawn");
  const idle = profiled?.profile_top?.find((entry) => entry.function === "(idle)");
  const gc = profiled?.profile_top?.find((entry) => entry.function === "(garbage collector)");
  if (profiled && spawn) {
    out.push(
      `**Ours, own CPU.** In the profile below ${spawn.self_percent} % of the main thread's samples sit in \`ChildProcess.spawn\`: libuv starts each helper with fork() + exec() on the main thread (posix_spawn only on macOS; nodejs/node#14917), copying the page tables of a ${profiled.peak_memory_mb} MB process and blocking the event loop meanwhile (the sampler counts that wall time, preemption on this loaded machine included, so it is a share of the thread's time rather than of CPU; the profiler itself raised that run's CPU per host to ${profiled.cpu_ms_per_host} ms). Go starts its helper with clone(CLONE_VFORK), which copies nothing. The rest is spread thin: garbage collection ${gc?.self_percent ?? "-"} %, socket writes, signature checks of the provisioning JWT, the AWS SDK; ${idle?.self_percent ?? "-"} % idle. A helper started from a small long-lived launcher process, or an in-process helper (\`helper_function\` / the inline example), would remove most of it; neither is what the Go daemon does, so the benchmark keeps the executable.`,
      "",
    );
  }
  const bestGo = best(report.runs, "go", report.fleets[0]?.fleet ?? "");
  const incompleteGo = goRuns.filter((r) => !r.complete);
  out.push(
    `**Go.** Every RPC opens its own NATS connection (go-choria's client connects per request unless given one), so nats-server works ${mean(goRuns.filter((r) => r.fleet === sweepFleet).map((r) => perHost(r, r.cpu_s.nats_server)))} ms per host for Go against ${mean(oursRuns.filter((r) => r.fleet === sweepFleet).map((r) => perHost(r, r.cpu_s.nats_server)))} for ours, which keeps one connection per invocation container. Hosts/min by \`workers\`: ${goRuns.filter((r) => r.fleet === report.fleets[0]?.fleet).map((r) => `${r.setting}: ${r.hosts_per_min}`).join(", ")}; memory grows with them: VmHWM ${goRuns.map((r) => `${r.peak_memory_mb} MB (${r.setting}, ${r.nodes})`).join(", ")}, against ${Math.max(...oursRuns.map((r) => r.peak_memory_mb))} MB at most for ours. It admits every discovered host at once, so admission-to-restart is the queue wait (p50 ${bestGo?.admission_to_restart_ms.p50 ?? "-"} ms at its best ${report.fleets[0]?.fleet ?? ""} setting); a host that waited more than 2 x \`interval\` (2 min) is dropped and only found again by the next discovery a minute later.${incompleteGo.length ? ` That stall is why ${incompleteGo.map((r) => `${r.fleet} (${r.setting})`).join(", ")} had not finished when the run's bound stopped it; its hosts/min is over the hosts it did restart.` : ""} A longer \`interval\` would avoid it and was not swept.`,
    "",
  );
  const profiledTwin = profiled && oursRuns.find((r) => r.fleet === profiled.fleet && r.setting === profiled.setting);
  const noise =
    profiled && profiledTwin
      ? ` The same setting measured twice (the plain run and the profiled one) gave ${profiledTwin.hosts_per_min} and ${profiled.hosts_per_min} hosts/min; runs are minutes apart on a machine other jobs share, so one setting's single run is not a trend.`
      : "";
  out.push(
    `**Ours.** Discovery admits in chunks of ten (five chunks in flight, each ten conditional writes and one SendMessageBatch), so provisioning starts within seconds of discovery and admission-to-restart stays short; the admission rate is bounded by DynamoDB Local's write latency on this machine: its JVM used ${mean(oursRuns.filter((r) => r.fleet === sweepFleet).map((r) => perHost(r, r.cpu_s.dynamodb_local)))} ms CPU per host in ours' runs, and its first use in a fresh JVM is several times slower, hence the unmeasured warm-up run. Hosts/min by provision concurrency x workers: ${oursRuns.filter((r) => r.fleet === report.fleets[0]?.fleet).map((r) => `${r.setting}: ${r.hosts_per_min}`).join(", ")}.${noise}`,
    "",
  );
  const refused = report.runs.reduce((sum, r) => sum + r.refused_requests, 0);
  out.push(
    `**The simulator and the real Go provisioner.** Over every Go run the simulated nodes refused or dropped ${refused} of the Go provisioner's requests (discovery, \`jwt\`, \`gen25519\`, \`rpcutil#inventory\`, \`configure\` with a server JWT and policies, \`restart\` with splay): it accepted everything go-choria's generated clients sent, on protocol v1 without TLS.${report.generated < STRICT_SIMULATOR_MERGED ? ` ${SIMULATOR_NOTE}` : ""} Not exercised on the simulator: a TLS broker (\`choria_insecure: true\` makes the Go daemon dial plain NATS) and protocol v2 signed requests; ${report.real_fleet.run ? "the real fleet's section has both sides over TLS on go-choria's broker (protocol v1)" : "the real fleet, which has both sides over TLS, was not run"}.`,
  );
  return out;
}

/** The setting a recorded run used, as runOnce takes it. */
function settingOf(r: RunResult): RunSpec["setting"] {
  const [maxConcurrency, workers] = r.setting.split(" x ").map(Number);
  return r.side === "go" ? { workers: Number(r.setting.replace("workers ", "")) } : { maxConcurrency: maxConcurrency ?? 10, workers: workers ?? 10 };
}

/** Each side's best setting from the simulator sweep for the real fleet, or the first swept when a side has no complete run. */
function realFleetSettings(goBest: RunResult | undefined, oursBest: RunResult | undefined): { goWorkers: number; ours: { maxConcurrency: number; workers: number } } {
  const ours = oursBest ? settingOf(oursBest) : undefined;
  return {
    goWorkers: goBest ? settingOf(goBest).workers : (GO_WORKERS[0] ?? 64),
    ours: ours?.maxConcurrency !== undefined ? { maxConcurrency: ours.maxConcurrency, workers: ours.workers } : (OURS_SETTINGS[0] ?? { maxConcurrency: 10, workers: 10 }),
  };
}

/** Why the real fleet cannot run here, or undefined when it can (go-choria built or cached by build-choria.sh). */
function realFleetUnavailable(goBin: string | undefined): string | undefined {
  if (options.realFleetNodes === 0) return "--real-fleet 0";
  if (process.getuid?.() !== 0) return "the real fleet needs root (each server runs in its own UTS and mount namespace)";
  if (!goBin) return "no Go provisioner binary";
  const build = spawnSync("bash", [join(REPO_ROOT, "scripts/peers/build-choria.sh")], { encoding: "utf8" });
  if (build.status !== 0) return `scripts/peers/build-choria.sh failed: ${(build.stderr || build.stdout).trim().split("\n").slice(-3).join(" ")}`;
  return undefined;
}

/** The two sides on the real go-choria fleet, alternated, each with its setting from the simulator sweep. */
async function realFleetComparison(goBin: string | undefined, settings: { goWorkers: number; ours: { maxConcurrency: number; workers: number } }): Promise<RealFleetReport> {
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
      const run = await runRealFleet(REPO_ROOT, { side, nodes: options.realFleetNodes, goBin, goWorkers: settings.goWorkers, ours: settings.ours, timeoutS });
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
HTTP client's diagnostics channels, with no proxy in between). The machine is shared: the 1-minute load
average at each run's start is given, and figures from a run that started above the core count
describe a busy machine.
`;

/** Appends this benchmark's per-stage figures (every run of ours) to reports/pipeline-stages.md. */
async function appendStages(report: Report): Promise<void> {
  const path = join(REPO_ROOT, "reports/pipeline-stages.md");
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
      `### ${r.fleet}, ${r.setting}, ${r.helper} helper${r.profile_top ? " (profiled)" : ""}: ${r.restarted}/${r.nodes} restarted, ${r.hosts_per_min} hosts/min, load ${r.load_average_1m.start} at start (max ${r.load_average_1m.max})`,
      "",
      ...stagesTable(r.stages),
    );
  }
  await writeFile(path, `${existing.trimEnd()}\n${lines.join("\n")}\n`);
}

/**
 * A report written before runs carried their helper, start load and restarted count: all its runs
 * used the bash + jq helper, and the load it read before each run is that run's start load.
 */
function upgradeReport(report: Report): Report {
  const runs = report.runs.map((run) => {
    const old = run as RunResult & { load_average_1m: { before?: number; after: number } };
    const start = old.load_average_1m.start ?? old.load_average_1m.before ?? 0;
    return {
      ...run,
      helper: run.helper ?? "bash",
      restarted: run.restarted ?? run.provisioned,
      load_average_1m: { start, max: old.load_average_1m.max ?? Math.max(start, old.load_average_1m.after), after: old.load_average_1m.after, samples: old.load_average_1m.samples ?? [] },
    };
  });
  return { ...report, runs, fleets: summarise(runs, report.cpus) };
}

async function main(): Promise<void> {
  if (process.argv.includes("--markdown-only")) return rewriteFromRecordedRuns();
  const started = Date.now();
  const go = goProvisioner();
  if (go.reason) process.stdout.write(`Go provisioner unavailable: ${go.reason}\n`);
  if (options.realFleetOnly) return rerunRealFleet(go.bin, started);
  const dynamoDb = await startDynamoDbLocal();
  const helpers = availableHelpers();
  const shared: Shared = { dynamoDb, goBin: go.bin, helpers };
  // The sweep runs with the first helper asked for; the other helper runs each side's best setting.
  const [sweepHelper, ...otherHelpers] = options.helpers.filter((kind) => helpers[kind] !== undefined);
  let matrix: { results: RunResult[]; cut: string[] };
  try {
    matrix = await runMatrix(shared, sweepHelper, otherHelpers);
  } finally {
    await dynamoDb.stop();
  }
  const { results, cut } = matrix;
  const sweepFleet = `simulator-${SIZES[0]}`;
  const sweepHelperKind = sweepHelper ?? "bash";
  const realFleet = await realFleetComparison(go.bin, realFleetSettings(best(results, "go", sweepFleet, sweepHelperKind), best(results, "ours", sweepFleet, sweepHelperKind)));
  const report: Report = {
    generated: new Date().toISOString(),
    wall_seconds: (Date.now() - started) / 1000,
    cpus: CORES,
    node: process.version,
    go_provisioner: { binary: go.bin ?? null, ...(go.reason ? { unavailable_reason: go.reason } : {}) },
    real_fleet: realFleet,
    cut,
    fleets: summarise(results, CORES),
    runs: results,
  };
  await mkdir(join(REPO_ROOT, "reports"), { recursive: true });
  await writeFile(join(REPO_ROOT, "reports/peer.json"), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(REPO_ROOT, "reports/peer.md"), markdown(report));
  await appendStages(report);
  process.stdout.write(`\nwrote reports/peer.json, reports/peer.md and a section of reports/pipeline-stages.md (${report.wall_seconds.toFixed(0)} s)\n`);
  for (const f of report.fleets) process.stdout.write(`${JSON.stringify(f)}\n`);
}

/** `--markdown-only`: peer.md, and the fleet summaries in peer.json, again from the recorded runs. */
async function rewriteFromRecordedRuns(): Promise<void> {
  const recorded = upgradeReport(JSON.parse(await readFile(join(REPO_ROOT, "reports/peer.json"), "utf8")) as Report);
  // The fleet summaries follow the runs, so runs merged from two invocations are summarised as one report.
  await writeFile(join(REPO_ROOT, "reports/peer.json"), `${JSON.stringify(recorded, null, 2)}\n`);
  await writeFile(join(REPO_ROOT, "reports/peer.md"), markdown(recorded));
  process.stdout.write("rewrote reports/peer.md and the fleet summaries in reports/peer.json from its runs\n");
}

/** `--real-fleet-only`: the real fleet again, with the settings of the recorded sweep, into the recorded report. */
async function rerunRealFleet(goBin: string | undefined, started: number): Promise<void> {
  const recorded = upgradeReport(JSON.parse(await readFile(join(REPO_ROOT, "reports/peer.json"), "utf8")) as Report);
  const sweepFleet = recorded.fleets[0]?.fleet ?? `simulator-${SIZES[0]}`;
  const settings = realFleetSettings(best(recorded.runs, "go", sweepFleet, "bash"), best(recorded.runs, "ours", sweepFleet, "bash"));
  const report: Report = { ...recorded, real_fleet: await realFleetComparison(goBin, settings) };
  await writeFile(join(REPO_ROOT, "reports/peer.json"), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(REPO_ROOT, "reports/peer.md"), markdown(report));
  process.stdout.write(`\nwrote the real fleet into reports/peer.json and reports/peer.md (${((Date.now() - started) / 1000).toFixed(0)} s): ${JSON.stringify(report.real_fleet.summary ?? report.real_fleet.reason)}\n`);
}

/** The helpers asked for that this machine has: bash always, the compiled one if it builds. */
function availableHelpers(): Shared["helpers"] {
  const helpers: Shared["helpers"] = { bash: options.helpers.includes("bash") ? HELPERS.bash : undefined, compiled: undefined };
  if (options.helpers.includes("compiled")) {
    try {
      helpers.compiled = buildCompiledHelper();
    } catch (error) {
      process.stdout.write(`compiled helper unavailable: ${error instanceof Error ? error.message : String(error)}\n`);
    }
  }
  return helpers;
}

/**
 * Every run on the simulator: an unmeasured warm-up, the sweep at the first size, then each side's
 * best setting with the other helpers and at the larger sizes. `cut` names what of the full matrix was left out.
 */
async function runMatrix(shared: Shared, sweepHelper: HelperKind | undefined, otherHelpers: HelperKind[]): Promise<{ results: RunResult[]; cut: string[] }> {
  const results: RunResult[] = [];
  const cut: string[] = [];
  const [sweepSize, ...larger] = SIZES;
  if (sweepHelper === undefined) throw new Error(`none of the helpers asked for (${options.helpers.join(", ")}) is available`);
  if (WARM_UP_NODES > 0) {
    process.stdout.write(`\nwarm-up (not reported): ours on ${WARM_UP_NODES} nodes, so DynamoDB Local's JVM is not cold for the first measured run`);
    await runOnce({ side: "ours", fleet: "warm-up", nodes: WARM_UP_NODES, setting: OURS_SETTINGS[0] ?? { maxConcurrency: 10, workers: 10 }, helper: sweepHelper }, shared);
  }
  const sweepFleet = `simulator-${sweepSize}`;
  if (sweepSize !== undefined) results.push(...(await runSweep(shared, sweepFleet, sweepSize, sweepHelper)));
  const bestGo = best(results, "go", sweepFleet, sweepHelper);
  const bestOurs = best(results, "ours", sweepFleet, sweepHelper);
  for (const helper of otherHelpers) {
    if (sweepSize === undefined) break;
    if (bestGo) results.push(await runOnce({ side: "go", fleet: sweepFleet, nodes: sweepSize, setting: settingOf(bestGo), helper }, shared));
    if (bestOurs) results.push(await runOnce({ side: "ours", fleet: sweepFleet, nodes: sweepSize, setting: settingOf(bestOurs), helper }, shared));
    cut.push(`the ${helper} helper ran only each side's best setting from the ${sweepHelper} sweep`);
  }
  for (const nodes of larger) {
    const fleet = `simulator-${nodes}`;
    for (const helper of [sweepHelper, ...otherHelpers]) {
      if (bestGo) results.push(await runOnce({ side: "go", fleet, nodes, setting: settingOf(bestGo), helper }, shared));
      if (bestOurs) results.push(await runOnce({ side: "ours", fleet, nodes, setting: settingOf(bestOurs), helper }, shared));
    }
    cut.push(`at ${nodes} nodes only each side's best setting from the ${sweepSize}-node sweep was run`);
  }
  return { results, cut };
}

/** The sweep: Go's `workers` and ours' settings, alternated so load from other jobs on the machine falls on both; then ours' best, profiled, with --profile. */
async function runSweep(shared: Shared, fleet: string, nodes: number, helper: HelperKind): Promise<RunResult[]> {
  const results: RunResult[] = [];
  const rounds = Math.max(shared.goBin ? GO_WORKERS.length : 0, OURS_SETTINGS.length);
  for (let i = 0; i < rounds; i++) {
    const workers = GO_WORKERS[i];
    if (shared.goBin && workers !== undefined) results.push(await runOnce({ side: "go", fleet, nodes, setting: { workers }, helper }, shared));
    const ours = OURS_SETTINGS[i];
    if (ours) results.push(await runOnce({ side: "ours", fleet, nodes, setting: ours, helper }, shared));
  }
  const bestOurs = best(results, "ours", fleet, helper);
  if (PROFILE && bestOurs) results.push(await runOnce({ side: "ours", fleet, nodes, setting: settingOf(bestOurs), helper, profile: true }, shared));
  return results;
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`peer benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
