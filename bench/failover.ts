/**
 * Failover benchmark for the DynamoDB lease, in real time against a DynamoDB Local it starts
 * itself. Each deployment runs two function containers as production composes them: the
 * `leaseKeeper` function (a fresh invocation every minute on its EventBridge schedule, at a random
 * phase per deployment and run: `Leadership.keepLease`, one lease round, then the ticks of the
 * minute ahead armed by `TickArming`) and the `lifecycle` function (each tick delivered from the
 * lifecycle queue runs `Ticks.run`: one lease round, and a round that took the lease over arms the
 * rest of the minute). Each container has its own gate (`createAppLeaseGate` over a
 * `createLeaseClient` client, from a parsed configuration: the same defaults, the request TTL as
 * delivery horizon, bounded rounds, the pause switch read before every round) and its own
 * `Invocations` wrapper (every invocation begins a new gate invocation).
 *
 * Modelled, not real: SQS. A tick is a delayed message (DelaySeconds, whole seconds); the bench
 * delivers it with a timer no earlier than its delay, and without SQS's or the Lambda poller's own
 * pickup latency. The broker side of a tick (the startup events the LifecycleBridge takes while
 * leading) is a stub that returns at once: it does not touch the lease.
 *
 * For each settings profile a leader and a standby keep and watch the lease; the leader then stops
 * (a crash: no release, its ticks still queued die with it) at a random phase of its tick cycle and
 * of both minute schedules, and we time from its last renewal (and from the crash) until the
 * standby's gate opens for the longest RPC attempt. A second part counts the DynamoDB requests, the
 * ticks and the invocations an idle leader + standby make. It prints figures and asserts none.
 *
 *   npm run bench:failover -- [--profiles default,short] [--runs 5] [--idle-ms 120000] [--report-dir reports]
 */
import { cpus, loadavg } from "node:os";
import { AsyncLocalStorage } from "node:async_hooks";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Invocations } from "../lib/app/invocation";
import { Leadership } from "../lib/app/leadership";
import type { BridgeResult } from "../lib/app/lifecycle-events";
import { parseTick, TickArming, Ticks } from "../lib/app/ticks";
import type { InvocationContext, MessageQueue, OutgoingMessage } from "../lib/app/use-case-ports";
import { createAppLeaseGate } from "../lib/aws/compose-lease-gate";
import { createLeaseClient } from "../lib/aws/clients";
import { APP_DEFAULTS } from "../lib/aws/settings";
import { leaseSettingsOf, parseConfig } from "../lib/config/config";
import type { ProvisionerConfig } from "../lib/config/types";
import { RPC_PLAN } from "../lib/engine/plan";
import { createLeaseTable } from "../dev/local/resources";
import type { LeaseGate, LeaseOutcome } from "../lib/ports/lease-gate";
import { LOCAL_AWS, startDynamoDbLocal } from "../dev/local/services";
import { silentLogger } from "../lib/ports/logger";
import { systemClock } from "../lib/ports/clock";
import type { Metrics } from "../lib/ports/metrics";
import { parsedOptions, reportDirOf, runBenchmark, UsageError, wholeNumber } from "./command";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

/** EventBridge's rate(1 minute) for the leaseKeeper function; also how far ahead it arms ticks (KEEPER_RATE_SECONDS). */
const KEEPER_SCHEDULE_MS = APP_DEFAULTS.keeperRateSeconds * 1000;
/** Both functions' Lambda timeout (serverless.yml): an invocation's remainingMs counts down from it. */
const FUNCTION_TIMEOUT_MS = 30_000;
const TABLE = "bench-failover";
/** The standby's gate must open for the longest attempt the engine asks for. */
const LONGEST_ATTEMPT_MS = Math.max(...Object.values(RPC_PLAN).map((rpc) => rpc.timeoutMs));
/** SendMessageBatch takes at most ten entries. */
const SQS_BATCH = 10;

/** `lease` as an operator writes it; absent means production's defaults. */
const PROFILES = [
  { name: "default", lease: undefined },
  { name: "short", lease: { duration: "25s", renew_interval: "5s", skew_bound: "2s" } },
] as const;
type Profile = (typeof PROFILES)[number];
const PROFILE_NAMES: readonly string[] = PROFILES.map((profile) => profile.name);

const USAGE = `Usage: npm run bench:failover -- [--profiles <names>] [--runs <n>] [--idle-ms <ms>] [--report-dir <dir>]

Times a lease failover in real time against DynamoDB Local: for each settings profile named
(comma-separated, of ${PROFILE_NAMES.join(", ")}; default all), <runs> crashed leaders at once (default 5), each from
its last renewal and from its crash to the standby's open gate. At the same time it counts an idle
leader's and standby's lease traffic on the default profile over <ms> (default 120000) after a
first minute. Writes <dir>/failover.json and <dir>/failover.md (default reports/).
`;

interface Options {
  profiles: Profile[];
  runs: number;
  idleWindowMs: number;
  reportDir: string;
  /** The options as given, to name the command in the report. */
  args: string[];
}

function options(args: string[]): Options | undefined {
  const values = parsedOptions("bench:failover", { profiles: { type: "string" }, runs: { type: "string" }, "idle-ms": { type: "string" }, "report-dir": { type: "string" }, help: { type: "boolean" } }, args);
  if (values.help) return undefined;
  const whole = (flag: string, text: string | undefined, fallback: number) => wholeNumber("bench:failover", flag, text, fallback);
  return {
    profiles: chosenProfiles(values.profiles),
    runs: whole("--runs", values.runs, 5),
    idleWindowMs: whole("--idle-ms", values["idle-ms"], 120_000),
    reportDir: reportDirOf(values["report-dir"]),
    args,
  };
}

function chosenProfiles(text: string | undefined): Profile[] {
  if (text === undefined) return [...PROFILES];
  const names = text.split(",").map((name) => name.trim());
  const unknown = names.find((name) => !PROFILE_NAMES.includes(name));
  if (unknown !== undefined) {
    throw new UsageError(`bench:failover: --profiles takes names from ${PROFILE_NAMES.join(", ")}, not ${text}`);
  }
  // In the benchmark's own order, each once, whatever order they were named in.
  return PROFILES.filter((profile) => names.includes(profile.name));
}

const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

interface RunResult {
  crashToOpenMs: number;
  lastKeepToOpenMs: number;
  /** The term the leader last kept, and the term the standby won. */
  leaderTerm: number;
  newTerm: number;
  /** Which of the standby's functions won the term: its claim tick, or its keeper's minute run. */
  takenOverBy: "tick" | "keeper";
  /** When the standby's and the leader's keeper schedules fire, relative to each other (ms, 0-60 000). */
  schedulePhaseMs: number;
}

/** What one deployment did, counted at its own clients and queue. */
interface Counters {
  /** DynamoDB requests by command. */
  requests: Map<string, number>;
  rounds: number;
  sendBatches: number;
  ticksArmed: number;
  invocations: number;
}

/** One Lambda function's warm container: its own gate and invocation wrapper. */
interface Container {
  client: DynamoDBClient;
  gate: LeaseGate;
  invocations: Invocations;
}

/** A deployment: its keeper and lifecycle containers, the ticks queued for it, and what it did. */
interface Deployment {
  config: ProvisionerConfig;
  keeper: Container;
  lifecycle: Container;
  timers: Set<NodeJS.Timeout>;
  stopped: boolean;
  counters: Counters;
  /** Wall-clock ms the last round that left this deployment holding was sent (any container). */
  lastHeldRoundSentAt: number;
  /** The term that round held. */
  lastHeldTerm: number;
}

type OnWon = (gate: LeaseGate, term: number, by: Container) => Promise<void>;

function deploymentConfig(site: string, deploymentId: string, lease: Profile["lease"]): ProvisionerConfig {
  return parseConfig(
    {
      site,
      deployment_id: deploymentId,
      leader_election: true,
      // Required keys the lease does not use: nothing here connects to a broker or runs a helper.
      broker_urls: ["nats://127.0.0.1:4222"],
      helper: "/bin/true",
      ...(lease ? { lease } : {}),
    },
    { env: {} },
  );
}

/** A Lambda invocation's context: the function's timeout from now. */
function invocationContext(): InvocationContext {
  const deadline = performance.now() + FUNCTION_TIMEOUT_MS;
  return { remainingMs: () => deadline - performance.now() };
}

function container(endpoint: string, config: ProvisionerConfig, counters: Counters, onWon?: OnWon): Container {
  const client = createLeaseClient({ ...LOCAL_AWS, endpoint });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName as string;
      counters.requests.set(command, (counters.requests.get(command) ?? 0) + 1);
      return next(args);
    },
    { step: "initialize", name: "benchRequestCounter" },
  );
  const self: Partial<Container> = { client };
  const { gate } = createAppLeaseGate(config, {
    client,
    tableName: TABLE,
    metrics: noMetrics,
    clock: systemClock,
    logger: silentLogger,
    ...(onWon ? { onWon: (term: number) => onWon(gate, term, self as Container) } : {}),
  });
  const noBroker = { closeIfPublishPending: () => Promise.resolve(false) };
  Object.assign(self, { gate, invocations: new Invocations({ gate, broker: noBroker, logger: silentLogger, attributes: new AsyncLocalStorage() }) });
  return self as Container;
}

/** A timer of this deployment, cancelled when it stops. */
function later(d: Deployment, ms: number, run: () => Promise<unknown>): void {
  if (d.stopped) return;
  const timer = setTimeout(() => {
    d.timers.delete(timer);
    if (!d.stopped) void run().catch((error: unknown) => console.error("bench: an invocation failed", error));
  }, Math.max(0, ms));
  d.timers.add(timer);
}

function stop(d: Deployment): void {
  d.stopped = true;
  for (const timer of d.timers) clearTimeout(timer);
  d.timers.clear();
}

/**
 * The deployment's lifecycle queue as SQS behaves for ticks: each message is delivered (to the
 * lifecycle function) no earlier than its DelaySeconds, one message per invocation.
 */
function tickQueue(d: Deployment, deliver: (body: string) => Promise<unknown>): Pick<MessageQueue, "sendAll"> {
  return {
    sendAll: (messages: readonly OutgoingMessage[]) => {
      d.counters.sendBatches += Math.ceil(messages.length / SQS_BATCH);
      d.counters.ticksArmed += messages.length;
      const sentAt = Date.now();
      for (const message of messages) {
        const visibleAt = sentAt + (message.delaySeconds ?? 0) * 1000;
        // A timer may fire a little before the wall clock reaches its end; SQS never delivers early.
        const whenVisible = async (): Promise<unknown> => {
          if (Date.now() >= visibleAt) return deliver(message.body);
          later(d, visibleAt - Date.now(), whenVisible);
          return undefined;
        };
        later(d, visibleAt - sentAt, whenVisible);
      }
      return Promise.resolve(messages.map(() => true));
    },
  };
}

/** The gate as the use cases see it, recording when a round that left the deployment holding was sent. */
function recordingGate(d: Deployment, gate: LeaseGate): Pick<LeaseGate, "acquireOrKeep" | "assertOpen"> {
  return {
    acquireOrKeep: async (remainingMs) => {
      const sentAt = Date.now();
      d.counters.rounds++;
      const outcome: LeaseOutcome = await gate.acquireOrKeep(remainingMs);
      if (outcome.holding && sentAt >= d.lastHeldRoundSentAt) {
        d.lastHeldRoundSentAt = sentAt;
        d.lastHeldTerm = outcome.term;
      }
      return outcome;
    },
    assertOpen: (term, attemptTimeoutMs) => gate.assertOpen(term, attemptTimeoutMs),
  };
}

const notInBench = (what: string) => (): never => {
  throw new Error(`the failover bench does not ${what}`);
};

/** The keeper's use case as composeLeadership builds it; only keepLease runs here, so the rest are stubs. */
function keeperLeadership(d: Deployment, arming: TickArming): Leadership {
  return new Leadership({
    settings: {
      leaderElection: true,
      identity: d.config.identity,
      discoveryMaxNodes: d.config.discoveryMaxNodes,
      discoveryNewNamesPerInterval: d.config.discoveryNewNamesPerInterval,
      discoveryIntervalMs: d.config.intervalMs,
      discoveryBacklogMs: d.config.discoveryBacklogMs,
      allowShortIdentities: d.config.allowShortIdentities,
      deadlineMarginMs: APP_DEFAULTS.deadlineMarginMs,
    },
    gate: recordingGate(d, d.keeper.gate),
    ticks: arming,
    broker: { discover: notInBench("discover"), publishStartup: notInBench("publish") },
    admission: { admitAndEnqueue: notInBench("admit") },
    registry: { siteNames: notInBench("read the registry"), quarantine: notInBench("write the registry"), waitingNames: notInBench("read the registry"), rememberWaiting: notInBench("write the registry") },
    hostWork: { counts: notInBench("read the host-work queue") },
    continuations: { send: notInBench("continue a discovery") },
    clock: systemClock,
    logger: silentLogger,
    metrics: noMetrics,
  });
}

/** The broker side of a tick: nothing waits, so it returns at once (it never touches the lease). */
const idleBridge = { run: (): Promise<BridgeResult> => Promise.resolve({ mode: "jetstream", handled: 0, deadLettered: 0, paused: false }) };

/**
 * A deployment whose keeper runs every minute from `keeperFirstAt` (performance.now() ms), arming
 * ticks its lifecycle function runs when they are delivered.
 */
function deployment(endpoint: string, config: ProvisionerConfig, keeperFirstAt: number, onWon?: OnWon): Deployment {
  const counters: Counters = { requests: new Map(), rounds: 0, sendBatches: 0, ticksArmed: 0, invocations: 0 };
  const d: Deployment = {
    config,
    keeper: container(endpoint, config, counters, onWon),
    lifecycle: container(endpoint, config, counters, onWon),
    timers: new Set(),
    stopped: false,
    counters,
    lastHeldRoundSentAt: 0,
    lastHeldTerm: 0,
  };
  const timing = { keepIntervalMs: config.lease.keepIntervalMs, armAheadMs: KEEPER_SCHEDULE_MS };
  const invoke = <T>(c: Container, work: (ctx: InvocationContext) => Promise<T>): Promise<T> => {
    counters.invocations++;
    const ctx = invocationContext();
    return c.invocations.run(ctx, () => work(ctx));
  };
  const ticks: Ticks = new Ticks({
    gate: recordingGate(d, d.lifecycle.gate),
    bridge: idleBridge,
    arming: new TickArming({ queue: tickQueue(d, (body) => runTick(body)), timing, clock: systemClock, logger: silentLogger }),
    keepIntervalMs: config.lease.keepIntervalMs,
    clock: systemClock,
    logger: silentLogger,
  });
  const runTick = (body: string) => {
    const tick = parseTick(body);
    return tick ? invoke(d.lifecycle, (ctx) => ticks.run([tick], ctx)) : Promise.resolve();
  };
  const keeper = keeperLeadership(d, new TickArming({ queue: tickQueue(d, runTick), timing, clock: systemClock, logger: silentLogger }));
  const scheduled = (at: number) =>
    later(d, at - performance.now(), () => {
      scheduled(at + KEEPER_SCHEDULE_MS);
      return invoke(d.keeper, (ctx) => keeper.keepLease(ctx));
    });
  scheduled(keeperFirstAt);
  return d;
}

function destroy(...deployments: Deployment[]): void {
  for (const d of deployments) {
    stop(d);
    d.keeper.client.destroy();
    d.lifecycle.client.destroy();
  }
}

const randomBelow = (ms: number) => Math.random() * ms;

async function failoverRun(endpoint: string, profile: Profile, site: string): Promise<RunResult> {
  const start = performance.now();
  const leader = deployment(endpoint, deploymentConfig(site, "leader", profile.lease), start);
  const schedulePhaseMs = 1 + randomBelow(KEEPER_SCHEDULE_MS - 2);
  let opened: { at: number; term: number; by: "tick" | "keeper" } | undefined;
  const standby: Deployment = deployment(endpoint, deploymentConfig(site, "standby", profile.lease), start + schedulePhaseMs, async (gate, term, by) => {
    // What the App does next with a won term: work, i.e. pass the gate for an attempt.
    await gate.assertOpen(term, LONGEST_ATTEMPT_MS);
    opened ??= { at: performance.now(), term, by: by === standby.keeper ? "keeper" : "tick" };
    stop(standby);
  });
  try {
    // Let both schedules run a minute (the standby's keeper has seen the leader), then crash the
    // leader at a random phase of its tick cycle and of both minute schedules.
    await systemClock.sleep(KEEPER_SCHEDULE_MS + randomBelow(KEEPER_SCHEDULE_MS));
    stop(leader);
    const crashedAt = performance.now();
    const crashedAtWall = Date.now();
    const giveUpAt = crashedAt + 4 * KEEPER_SCHEDULE_MS;
    while (!opened && performance.now() < giveUpAt) await systemClock.sleep(100);
    if (!opened) throw new Error(`the standby's gate never opened for site ${site}`);
    if (leader.lastHeldRoundSentAt === 0) throw new Error(`the leader never held the lease for site ${site}`);
    const openedWall = crashedAtWall + (opened.at - crashedAt);
    return {
      crashToOpenMs: Math.round(opened.at - crashedAt),
      lastKeepToOpenMs: Math.round(openedWall - leader.lastHeldRoundSentAt),
      leaderTerm: leader.lastHeldTerm,
      newTerm: opened.term,
      takenOverBy: opened.by,
      schedulePhaseMs: Math.round(schedulePhaseMs),
    };
  } finally {
    destroy(leader, standby);
  }
}

function snapshot(c: Counters): Counters {
  return { ...c, requests: new Map(c.requests) };
}

/** `after` less `before`, per field and per command. */
function since(before: Counters, after: Counters): Counters {
  const requests = new Map([...after.requests].map(([command, n]) => [command, n - (before.requests.get(command) ?? 0)]));
  return {
    requests,
    rounds: after.rounds - before.rounds,
    sendBatches: after.sendBatches - before.sendBatches,
    ticksArmed: after.ticksArmed - before.ticksArmed,
    invocations: after.invocations - before.invocations,
  };
}

/** Leader + one standby on the default profile, counted over `windowMs` after a first minute. */
async function idleRequests(endpoint: string, site: string, windowMs: number) {
  const start = performance.now();
  const leader = deployment(endpoint, deploymentConfig(site, "leader", PROFILES[0].lease), start);
  const standby = deployment(endpoint, deploymentConfig(site, "standby", PROFILES[0].lease), start + 1 + randomBelow(KEEPER_SCHEDULE_MS - 2));
  try {
    // The site's first acquisition and the first minute's arming are not steady traffic; the window
    // starts half a renew interval off the leader's rounds, so none falls on either of its ends.
    await systemClock.sleep(KEEPER_SCHEDULE_MS + leader.config.lease.keepIntervalMs / 2);
    const before = [snapshot(leader.counters), snapshot(standby.counters)] as const;
    await systemClock.sleep(windowMs);
    const [l, s] = [since(before[0], leader.counters), since(before[1], standby.counters)];
    return idleFigures(leader.config, windowMs, l, s);
  } finally {
    destroy(leader, standby);
  }
}

function idleFigures(config: ProvisionerConfig, windowMs: number, l: Counters, s: Counters) {
  const count = (c: Counters, command: string) => c.requests.get(command) ?? 0;
  const total = (c: Counters) => [...c.requests.values()].reduce((sum, n) => sum + n, 0);
  const perHour = (n: number) => Math.round((n * 3_600_000) / windowMs);
  const writes = (c: Counters) => count(c, "UpdateItemCommand");
  // Per minute: the leader's keeper run and its ticks (one per keep interval up to the next run); the standby's keeper run and its one tick.
  const leaderRoundsPerHour = 60 * (1 + Math.floor(KEEPER_SCHEDULE_MS / config.lease.keepIntervalMs));
  const standbyRoundsPerHour = 60 * 2;
  return {
    windowMs,
    leaderWrites: writes(l),
    standbyWrites: writes(s),
    pauseSwitchReads: count(l, "GetItemCommand") + count(s, "GetItemCommand"),
    requestsByCommand: Object.fromEntries([...new Set([...l.requests.keys(), ...s.requests.keys()])].sort().map((c) => [c, count(l, c) + count(s, c)])),
    writesPerHour: perHour(writes(l) + writes(s)),
    readsPerHour: perHour(count(l, "GetItemCommand") + count(s, "GetItemCommand")),
    requestsPerHour: perHour(total(l) + total(s)),
    // Per round: one pause-switch read, one conditional write; a standby's also records its presence (one more write).
    expectedPerHour: 2 * leaderRoundsPerHour + 3 * standbyRoundsPerHour,
    leaderRoundsPerHour: perHour(l.rounds),
    standbyRoundsPerHour: perHour(s.rounds),
    expectedRoundsPerHour: { leader: leaderRoundsPerHour, standby: standbyRoundsPerHour },
    ticksPerHour: perHour(l.ticksArmed + s.ticksArmed),
    sendMessageBatchesPerHour: perHour(l.sendBatches + s.sendBatches),
    invocationsPerHour: perHour(l.invocations + s.invocations),
  };
}

const summarise = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return {
    min: sorted[0] as number,
    median: sorted.length % 2 ? (sorted[mid] as number) : Math.round(((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2),
    max: sorted[sorted.length - 1] as number,
    mean: Math.round(values.reduce((sum, value) => sum + value, 0) / values.length),
  };
};

async function profileFigures(endpoint: string, profile: Profile, runCount: number) {
  const config = deploymentConfig("probe", "probe", profile.lease);
  const { leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs = 0 } = leaseSettingsOf(config);
  const settings = { leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs };
  const runs = await Promise.all(Array.from({ length: runCount }, (_, index) => failoverRun(endpoint, profile, `${profile.name}-${index}`)));
  // claimableAt = expiresAt + skew + horizon + 1 ms; the standby's tick is delayed in whole seconds.
  // Where that is under the keeper's minute, its first run after the renewal may itself take over.
  const earliest = settings.leaseDurationMs + settings.skewBoundMs + settings.deliveryHorizonMs;
  const lastKeepToOpenMs = summarise(runs.map((run) => run.lastKeepToOpenMs));
  return {
    name: profile.name,
    ...settings,
    runs,
    crashToOpenMs: summarise(runs.map((run) => run.crashToOpenMs)),
    lastKeepToOpenMs,
    failover_s: Number((lastKeepToOpenMs.median / 1000).toFixed(1)),
    boundFromLastKeepMs: { earliest, latest: Math.max(earliest + 1000, KEEPER_SCHEDULE_MS) },
  };
}

async function main(): Promise<void> {
  const chosen = options(process.argv.slice(2));
  if (!chosen) {
    process.stdout.write(USAGE);
    return;
  }
  const dynamo = await startDynamoDbLocal();
  const admin = createLeaseClient({ ...LOCAL_AWS, endpoint: dynamo.url });
  try {
    await createLeaseTable(admin, TABLE);
    const started = Date.now();
    const loadAtStart = loadavg()[0] ?? 0;
    const [profiles, idle] = await Promise.all([
      Promise.all(chosen.profiles.map((profile) => profileFigures(dynamo.url, profile, chosen.runs))),
      idleRequests(dynamo.url, "idle", chosen.idleWindowMs),
    ]);
    const defaults = profiles.find((profile) => profile.name === "default");
    const report: Report = {
      command: ["npm run bench:failover", ...(chosen.args.length > 0 ? ["--", ...chosen.args] : [])].join(" "),
      generatedAt: new Date().toISOString(),
      environment: {
        ...{ store: "DynamoDB Local (in memory, loopback)", queue: "SQS delays modelled by timers", node: process.version, timeScale: "real time" },
        // The figures are timers against protocol bounds, but a saturated machine delays them too.
        cpus: String(cpus().length),
        loadAverage1m: `${loadAtStart.toFixed(2)} at the start, ${(loadavg()[0] ?? 0).toFixed(2)} at the end`,
      },
      benchmarkWallClockMs: Date.now() - started,
      attemptTimeoutMs: LONGEST_ATTEMPT_MS,
      keeperScheduleMs: KEEPER_SCHEDULE_MS,
      ...(defaults ? { failover_s: defaults.failover_s } : {}),
      profiles,
      idle,
    };
    await mkdir(chosen.reportDir, { recursive: true });
    await writeFile(join(chosen.reportDir, "failover.json"), `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(join(chosen.reportDir, "failover.md"), markdown(report));
    console.log(JSON.stringify(report, null, 2));
  } finally {
    admin.destroy();
    await dynamo.stop();
  }
}

type Report = {
  /** The command line that made it. */
  command: string;
  generatedAt: string;
  environment: Record<string, string>;
  benchmarkWallClockMs: number;
  attemptTimeoutMs: number;
  keeperScheduleMs: number;
  /** Median seconds from the leader's last renewal to the standby's open gate, default profile (when it ran). */
  failover_s?: number;
  profiles: Array<Awaited<ReturnType<typeof profileFigures>>>;
  idle: Awaited<ReturnType<typeof idleRequests>>;
};

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const spread = (v: { min: number; median: number; max: number }) => `${s(v.min)} / ${s(v.median)} / ${s(v.max)}`;

function markdown(report: Report): string {
  const rows = report.profiles.map(
    (p) =>
      `| ${p.name} | ${s(p.leaseDurationMs)} / ${s(p.keepIntervalMs)} / ${s(p.skewBoundMs)} / ${s(p.deliveryHorizonMs)} | ${p.runs.length} | ` +
      `${spread(p.crashToOpenMs)} | ${spread(p.lastKeepToOpenMs)} | ${s(p.boundFromLastKeepMs.earliest)} – ${s(p.boundFromLastKeepMs.latest)} | ` +
      `${p.runs.filter((run) => run.takenOverBy === "tick").length} / ${p.runs.length} |`,
  );
  return [
    "# Lease failover benchmark",
    "",
    `Generated ${report.generatedAt} by \`${report.command}\` against DynamoDB Local on loopback, in real time (no time scaling); the whole run took ${s(report.benchmarkWallClockMs)}${report.environment.loadAverage1m ? `, on ${report.environment.cpus} cores at 1-minute load ${report.environment.loadAverage1m}` : ""}.`,
    "",
    "Each deployment runs its two lease functions as production composes them, each in its own container with its own gate",
    "(`createAppLeaseGate` in `lib/aws/compose-lease-gate.ts`, `createLeaseClient` in `lib/aws/clients.ts`, from a parsed configuration:",
    "the lease defaults, `rpc_ttl` (30 s) as the delivery horizon, 4 s round bound, the pause switch read before every round) and",
    "every invocation wrapped by `Invocations`: the `leaseKeeper` function runs `Leadership.keepLease` on its EventBridge schedule",
    `(every ${s(report.keeperScheduleMs)}, at a random phase per deployment and run), one lease round that then arms the ticks of the`,
    "minute ahead (`TickArming`): a holder one every `renew_interval`, a standby one at the lease's `claimableAt`; the `lifecycle` function",
    "runs `Ticks.run` for each tick delivered, one lease round (a takeover arms the rest of the minute).",
    "",
    "**Modelled, not real:** the lifecycle queue. A tick is delivered by a timer no earlier than its `DelaySeconds` (whole seconds,",
    "as SQS takes them), without SQS's or the Lambda poller's own pickup latency, which would add to the figures below. The",
    "broker side of a tick (the startup events taken while leading) is a stub that returns at once; it does not touch the lease.",
    "",
    "The leader stops at a random phase of its tick cycle and of both minute schedules (a crash: no release; its queued ticks die",
    "with it) and we time until the standby's gate opens (`assertOpen` on the new term for the longest RPC attempt,",
    `${s(report.attemptTimeoutMs)}, succeeds), from the crash and from the leader's last renewal (the last round that kept the lease).`,
    "",
    "| profile | lease / renew / skew / horizon | runs | crash → standby open (min / median / max) | leader's last renewal → standby open (min / median / max) | expected from last renewal | taken over by the claim tick |",
    "|---|---|---|---|---|---|---|",
    ...rows,
    "",
    ...(report.failover_s === undefined ? [] : [`Failover with the defaults: **${report.failover_s.toFixed(1)} s** (median from the last renewal).`, ""]),
    "The standby may claim once its clock is past `expiresAt + skew + horizon` (lease + skew + horizon after the leader's last",
    "renewal was sent). Its keeper's first run after that renewal (within a minute of it) sees the new expiry and arms one tick at",
    "`claimableAt`, rounded up to whole seconds; so from the last renewal the failover lands between lease + skew + horizon and",
    "one second more, plus a round trip. Where lease + skew + horizon is under a minute (the short profile), that run may come",
    "after the lease is claimable and take it over itself, up to a minute after the renewal. (Before the ticks, the keeper looped",
    "and looked every `renew_interval`: up to one renewal interval more.)",
    "",
    ...idleMarkdown(report.idle),
  ].join("\n");
}

function idleMarkdown(idle: Report["idle"]): string[] {
  return [
    "## Idle traffic (default profile, leader + 1 standby)",
    "",
    `After a first minute, each deployment's keeper and ticks ran on their schedule for ${s(idle.windowMs)}; requests counted at each`,
    "deployment's DynamoDB clients, ticks and batches at its lifecycle queue.",
    "",
    "| leader writes | standby writes | pause-switch reads | writes per hour | reads per hour | requests per hour (measured) | requests per hour (expected: leader rounds × 2 + standby rounds × 3) |",
    "|---|---|---|---|---|---|---|",
    `| ${idle.leaderWrites} | ${idle.standbyWrites} | ${idle.pauseSwitchReads} | ${idle.writesPerHour} | ${idle.readsPerHour} | ${idle.requestsPerHour} | ${idle.expectedPerHour} |`,
    "",
    `Requests by command: ${Object.entries(idle.requestsByCommand).map(([command, n]) => `${command} ${n}`).join(", ")}.`,
    `Lease rounds per hour: leader ${idle.leaderRoundsPerHour} (expected ${idle.expectedRoundsPerHour.leader}: its keeper run and one tick per`,
    `renew_interval up to the next run, every minute), standby ${idle.standbyRoundsPerHour} (expected ${idle.expectedRoundsPerHour.standby}: its keeper run and its one tick).`,
    `Ticks armed per hour: ${idle.ticksPerHour} in ${idle.sendMessageBatchesPerHour} SendMessageBatch requests; function invocations per hour: ${idle.invocationsPerHour}.`,
    "Every lease round is one strongly consistent GetItem of the deployment's pause switch, then one conditional UpdateItem",
    "(a standby's failed condition also costs one write unit, and a standby's round then records its presence among the lease's",
    "peers, one more UpdateItem); a read of the lease item only settles a write whose outcome",
    "was unknown. Provision, lifecycle and discover invocations add one round each (every invocation begins with one).",
    "Costs are in docs/lease.md.",
    "",
  ];
}

runBenchmark("failover benchmark", main);
