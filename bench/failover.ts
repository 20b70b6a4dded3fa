/**
 * Failover benchmark for the DynamoDB lease, in real time against a DynamoDB Local it starts
 * itself. Each deployment's gate is the one production builds (`createAppLeaseGate` over a
 * `createLeaseClient` client, from a parsed configuration: the same defaults, the request TTL as
 * delivery horizon, bounded rounds, the pause switch read before every round), and its keeper runs
 * as the scheduled `lease-keeper` function does: a fresh invocation (`beginInvocation`) every
 * minute, looping `KEEPER_MAX_RUN_MS`. For each settings profile a leader and a standby keep the
 * lease; the leader then stops (a crash: no release) at a random phase of its keep cycle and of
 * the minute schedule, and we time until the standby's gate opens for the longest RPC attempt. A
 * second part counts the DynamoDB requests an idle leader + standby make.
 *
 *   npx tsx bench/failover.ts            writes reports/failover.json and reports/failover.md
 */
import { mkdir, writeFile } from "node:fs/promises";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createAppLeaseGate } from "../lib/aws/compose-lease-gate";
import { createLeaseClient } from "../lib/aws/clients";
import { leaseSettingsOf, parseConfig } from "../lib/config/config";
import type { ProvisionerConfig } from "../lib/config/types";
import { RPC_PLAN } from "../lib/engine/plan";
import { createLeaseTable } from "../dev/local/resources";
import type { LeaseGate } from "../lib/ports/lease-gate";
import { runLeaseKeeper, type LeaseKeeperOptions } from "../lib/lease/keeper";
import { LOCAL_AWS, startDynamoDbLocal } from "../dev/local/services";
import { silentLogger } from "../lib/ports/logger";
import { systemClock } from "../lib/ports/clock";
import type { Metrics } from "../lib/ports/metrics";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const RUNS_PER_PROFILE = Number(process.env.FAILOVER_RUNS ?? 3);
/** How long one lease-keeper invocation loops (lib/app/leadership.ts): 58 s of the minute between two scheduled runs. */
const KEEPER_MAX_RUN_MS = 58_000;
const IDLE_WINDOW_MS = Number(process.env.FAILOVER_IDLE_MS ?? 120_000);
/** EventBridge's rate(1 minute) for the lease-keeper function. */
const KEEPER_SCHEDULE_MS = 60_000;
const TABLE = "bench-failover";
/** The standby's gate must open for the longest attempt the engine asks for. */
const LONGEST_ATTEMPT_MS = Math.max(...Object.values(RPC_PLAN).map((rpc) => rpc.timeoutMs));

/** `lease` as an operator writes it; absent means production's defaults. */
const PROFILES = [
  { name: "default", lease: undefined },
  { name: "short", lease: { duration: "25s", renew_interval: "5s", skew_bound: "2s" } },
] as const;

const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

interface RunResult {
  crashToOpenMs: number;
  lastKeepToOpenMs: number;
  newTerm: number;
}

interface Deployment {
  config: ProvisionerConfig;
  client: DynamoDBClient;
  gate: LeaseGate;
  /** DynamoDB requests this deployment sent, by command. */
  requests: Map<string, number>;
}

function deploymentConfig(site: string, deploymentId: string, lease: (typeof PROFILES)[number]["lease"]): ProvisionerConfig {
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

/** One deployment: its own lease client and gate, composed as production composes them. */
function deployment(endpoint: string, config: ProvisionerConfig, onWon?: (gate: LeaseGate, term: number) => Promise<void>): Deployment {
  const client = createLeaseClient({ ...LOCAL_AWS, endpoint });
  const requests = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      requests.set(context.commandName as string, (requests.get(context.commandName as string) ?? 0) + 1);
      return next(args);
    },
    { step: "initialize", name: "benchRequestCounter" },
  );
  const holder: { gate?: LeaseGate } = {};
  const { gate } = createAppLeaseGate(config, {
    client,
    tableName: TABLE,
    metrics: noMetrics,
    clock: systemClock,
    logger: silentLogger,
    ...(onWon ? { onWon: (term: number) => onWon(holder.gate as LeaseGate, term) } : {}),
  });
  holder.gate = gate;
  return { config, client, gate, requests };
}

/**
 * The lease-keeper function on its schedule: every minute from `firstAt` a new invocation of the
 * same warm container (its gate trusts nothing from the last one) loops for KEEPER_MAX_RUN_MS.
 */
async function scheduledKeeper(
  d: Deployment,
  options: { firstAt: number; until: number; signal?: AbortSignal; lease?: LeaseKeeperOptions["lease"] },
): Promise<void> {
  for (let tickAt = options.firstAt; tickAt < options.until && !options.signal?.aborted; tickAt += KEEPER_SCHEDULE_MS) {
    await systemClock.sleep(Math.max(0, tickAt - performance.now()));
    if (options.signal?.aborted) break;
    d.gate.beginInvocation();
    await runLeaseKeeper({
      lease: options.lease ?? d.gate,
      clock: systemClock,
      until: Math.min(tickAt + KEEPER_MAX_RUN_MS, options.until),
      intervalMs: d.config.lease.keepIntervalMs,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }
}

async function failoverRun(endpoint: string, profile: (typeof PROFILES)[number], site: string): Promise<RunResult> {
  const leader = deployment(endpoint, deploymentConfig(site, "leader", profile.lease));
  let openedAt = 0;
  let newTerm = 0;
  const standbyStop = new AbortController();
  const standby = deployment(endpoint, deploymentConfig(site, "standby", profile.lease), async (gate, term) => {
    // What the App does next with a won term: work, i.e. pass the gate for an attempt.
    await gate.assertOpen(term, LONGEST_ATTEMPT_MS);
    openedAt = performance.now();
    newTerm = term;
    standbyStop.abort();
  });
  const keepIntervalMs = leader.config.lease.keepIntervalMs;
  try {
    let lastKeepAt = 0;
    const recordingLeader = {
      acquireOrKeep: async () => {
        const sentAt = performance.now();
        const outcome = await leader.gate.acquireOrKeep();
        if (outcome.holding) lastKeepAt = sentAt;
        return outcome;
      },
    };
    leader.gate.beginInvocation();
    const first = await recordingLeader.acquireOrKeep();
    if (!first.holding) throw new Error("the leader could not take the fresh lease");

    const start = performance.now();
    const far = start + 10 * 60_000;
    const leaderStop = new AbortController();
    const leaderLoop = scheduledKeeper(leader, { firstAt: start, until: far, signal: leaderStop.signal, lease: recordingLeader });
    // Separate deployments' keepers run at unrelated phases.
    const standbyLoop = scheduledKeeper(standby, { firstAt: start + Math.random() * keepIntervalMs, until: far, signal: standbyStop.signal });

    // Crash at a random phase of the leader's keep cycle and of its minute schedule.
    await systemClock.sleep(keepIntervalMs + Math.random() * KEEPER_SCHEDULE_MS);
    leaderStop.abort();
    const crashedAt = performance.now();
    await Promise.all([leaderLoop, standbyLoop]);
    if (!openedAt) throw new Error(`the standby's gate never opened for site ${site}`);
    return { crashToOpenMs: Math.round(openedAt - crashedAt), lastKeepToOpenMs: Math.round(openedAt - lastKeepAt), newTerm };
  } finally {
    leader.client.destroy();
    standby.client.destroy();
  }
}

async function idleRequests(endpoint: string, site: string) {
  const leader = deployment(endpoint, deploymentConfig(site, "leader", PROFILES[0].lease));
  const standby = deployment(endpoint, deploymentConfig(site, "standby", PROFILES[0].lease));
  try {
    // The site's first acquisition is not idle traffic; take it before counting.
    leader.gate.beginInvocation();
    if (!(await leader.gate.acquireOrKeep()).holding) throw new Error("the leader could not take the fresh lease");
    leader.requests.clear();
    const start = performance.now();
    const until = start + IDLE_WINDOW_MS;
    await Promise.all([
      scheduledKeeper(leader, { firstAt: start, until }),
      scheduledKeeper(standby, { firstAt: start + 500, until }),
    ]);
    const count = (d: Deployment, command: string) => d.requests.get(command) ?? 0;
    const total = (d: Deployment) => [...d.requests.values()].reduce((sum, n) => sum + n, 0);
    const perHour = (n: number) => Math.round((n * 3_600_000) / IDLE_WINDOW_MS);
    const roundsPerHour = 3_600_000 / leader.config.lease.keepIntervalMs;
    return {
      windowMs: IDLE_WINDOW_MS,
      leaderWrites: count(leader, "UpdateItemCommand"),
      standbyWrites: count(standby, "UpdateItemCommand"),
      pauseSwitchReads: count(leader, "GetItemCommand") + count(standby, "GetItemCommand"),
      requestsByCommand: Object.fromEntries(
        [...new Set([...leader.requests.keys(), ...standby.requests.keys()])].sort().map((c) => [c, count(leader, c) + count(standby, c)]),
      ),
      writesPerHour: perHour(count(leader, "UpdateItemCommand") + count(standby, "UpdateItemCommand")),
      readsPerHour: perHour(count(leader, "GetItemCommand") + count(standby, "GetItemCommand")),
      requestsPerHour: perHour(total(leader) + total(standby)),
      // Per deployment and round: one pause-switch read, one conditional write.
      expectedPerHour: 2 * roundsPerHour * 2,
    };
  } finally {
    leader.client.destroy();
    standby.client.destroy();
  }
}

const summarise = (values: number[]) => ({
  min: Math.min(...values),
  max: Math.max(...values),
  mean: Math.round(values.reduce((sum, value) => sum + value, 0) / values.length),
});

async function main() {
  const dynamo = await startDynamoDbLocal();
  const admin = createLeaseClient({ ...LOCAL_AWS, endpoint: dynamo.url });
  try {
    await createLeaseTable(admin, TABLE);
    const started = Date.now();
    const [profiles, idle] = await Promise.all([
      Promise.all(
        PROFILES.map(async (profile) => {
          const config = deploymentConfig("probe", "probe", profile.lease);
          const { leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs = 0 } = leaseSettingsOf(config);
          const settings = { leaseDurationMs, keepIntervalMs, skewBoundMs, deliveryHorizonMs };
          const runs = await Promise.all(Array.from({ length: RUNS_PER_PROFILE }, (_, index) => failoverRun(dynamo.url, profile, `${profile.name}-${index}`)));
          // docs/lease.md, "Failover time": claimable from t + D + S + H, seen within one keep interval.
          const earliest = settings.leaseDurationMs + settings.skewBoundMs + settings.deliveryHorizonMs;
          return {
            name: profile.name,
            ...settings,
            runs,
            crashToOpenMs: summarise(runs.map((run) => run.crashToOpenMs)),
            lastKeepToOpenMs: summarise(runs.map((run) => run.lastKeepToOpenMs)),
            boundFromLastKeepMs: { earliest, latest: earliest + settings.keepIntervalMs },
          };
        }),
      ),
      idleRequests(dynamo.url, "idle"),
    ]);
    const report = {
      generatedAt: new Date().toISOString(),
      environment: { store: "DynamoDB Local (in memory, loopback)", node: process.version, timeScale: "real time" },
      benchmarkWallClockMs: Date.now() - started,
      attemptTimeoutMs: LONGEST_ATTEMPT_MS,
      profiles,
      idle,
    };
    await mkdir("reports", { recursive: true });
    await writeFile("reports/failover.json", `${JSON.stringify(report, null, 2)}\n`);
    await writeFile("reports/failover.md", markdown(report));
    console.log(JSON.stringify(report, null, 2));
  } finally {
    admin.destroy();
    await dynamo.stop();
  }
}

type Report = {
  generatedAt: string;
  benchmarkWallClockMs: number;
  attemptTimeoutMs: number;
  profiles: Array<{
    name: string;
    leaseDurationMs: number;
    keepIntervalMs: number;
    skewBoundMs: number;
    deliveryHorizonMs: number;
    runs: RunResult[];
    crashToOpenMs: { min: number; max: number; mean: number };
    lastKeepToOpenMs: { min: number; max: number; mean: number };
    boundFromLastKeepMs: { earliest: number; latest: number };
  }>;
  idle: Awaited<ReturnType<typeof idleRequests>>;
};

function markdown(report: Report): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const rows = report.profiles.map(
    (p) =>
      `| ${p.name} | ${s(p.leaseDurationMs)} / ${s(p.keepIntervalMs)} / ${s(p.skewBoundMs)} / ${s(p.deliveryHorizonMs)} | ${p.runs.length} | ` +
      `${s(p.crashToOpenMs.min)} / ${s(p.crashToOpenMs.mean)} / ${s(p.crashToOpenMs.max)} | ` +
      `${s(p.lastKeepToOpenMs.min)} / ${s(p.lastKeepToOpenMs.mean)} / ${s(p.lastKeepToOpenMs.max)} | ` +
      `${s(p.boundFromLastKeepMs.earliest)} – ${s(p.boundFromLastKeepMs.latest)} |`,
  );
  const idle = report.idle;
  return [
    "# Lease failover benchmark",
    "",
    `Generated ${report.generatedAt} by \`npx tsx bench/failover.ts\` against DynamoDB Local on loopback, in real time (no time scaling); the whole run took ${s(report.benchmarkWallClockMs)}.`,
    "",
    "Each deployment's gate is composed by the production code (`createAppLeaseGate` in `lib/aws/compose-lease-gate.ts`,",
    "`createLeaseClient` in `lib/aws/clients.ts`) from a parsed configuration: the lease defaults, `rpc_ttl` (30 s) as the delivery horizon,",
    "4 s round bound, the pause switch read before every round. Each keeper runs as the scheduled `lease-keeper`",
    `function does: a new invocation every minute looping ${s(KEEPER_MAX_RUN_MS)}. The leader stops at a random phase of its`,
    "keep cycle and of its minute schedule (a crash: no release) and we time until the standby's gate opens",
    `(\`assertOpen\` on the new term for the longest RPC attempt, ${s(report.attemptTimeoutMs)}, succeeds).`,
    "",
    "| profile | lease / keep / skew / horizon | runs | crash → standby open (min / mean / max) | leader's last keep → standby open (min / mean / max) | expected from last keep |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    "The standby may claim once its clock is past `expiresAt + skew + horizon` (lease + skew + horizon after the leader's",
    "last keep was sent) and it looks every keep interval, so from the last keep the failover lands between",
    "lease + skew + horizon and that plus one keep interval (docs/lease.md, \"Failover time\").",
    "",
    "## Idle DynamoDB traffic (default profile, leader + 1 standby)",
    "",
    `Each deployment's keeper ran on its schedule for ${s(idle.windowMs)}; requests counted at each deployment's DynamoDB client.`,
    "",
    "| leader writes | standby writes | pause-switch reads | writes per hour | reads per hour | requests per hour (measured) | requests per hour (expected: 2 deployments × 3600 / keep × 2) |",
    "|---|---|---|---|---|---|---|",
    `| ${idle.leaderWrites} | ${idle.standbyWrites} | ${idle.pauseSwitchReads} | ${idle.writesPerHour} | ${idle.readsPerHour} | ${idle.requestsPerHour} | ${idle.expectedPerHour} |`,
    "",
    `Requests by command: ${Object.entries(idle.requestsByCommand).map(([command, n]) => `${command} ${n}`).join(", ")}.`,
    "Every lease round is one strongly consistent GetItem of the deployment's pause switch, then one conditional UpdateItem",
    "(a standby's failed condition also costs one write unit); a read of the lease item only settles a write whose outcome",
    "was unknown. Provision, lifecycle and discover invocations add one round each (every invocation begins with one).",
    "Costs are in docs/lease.md.",
    "",
  ].join("\n");
}

await main();
