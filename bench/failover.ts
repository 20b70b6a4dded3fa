/**
 * Failover benchmark for the DynamoDB lease, in real time against a DynamoDB Local it starts
 * itself. For each settings profile a leader and a standby each run the lease-keeper loop; the
 * leader then stops renewing (as if it crashed: no release) at a random phase of its cycle, and we
 * measure how long until the standby's gate opens. A second part counts the DynamoDB requests an
 * idle leader + standby make, with each keeper run as the scheduled function runs it (a fresh
 * invocation every minute, looping ~58 s).
 *
 *   npx tsx bench/failover.ts            writes reports/failover.json and reports/failover.md
 */
import { mkdir, writeFile } from "node:fs/promises";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createLeaseGate } from "../lib/lease/gate";
import { createLeaseTable, DynamoDbLeaseStore } from "../lib/lease/dynamodb-lease-store";
import { runLeaseKeeper } from "../lib/lease/keeper";
import type { LeaseStore } from "../lib/lease/lease";
import { resolveLeaseSettings, type LeaseSettings } from "../lib/lease/settings";
import { LOCAL_AWS, startDynamoDbLocal } from "../lib/local/services";
import { systemClock, type Metrics } from "../lib/ports";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const RUNS_PER_PROFILE = Number(process.env.FAILOVER_RUNS ?? 3);
const IDLE_WINDOW_MS = Number(process.env.FAILOVER_IDLE_MS ?? 120_000);
const KEEPER_SCHEDULE_MS = 60_000;
const KEEPER_RUN_MS = 58_000;

const PROFILES = [
  { name: "default", leaseDurationMs: 30_000, renewIntervalMs: 10_000, skewBoundMs: 5_000 },
  { name: "aggressive", leaseDurationMs: 10_000, renewIntervalMs: 3_000, skewBoundMs: 2_000 },
] as const;

const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

interface RunResult {
  crashToOpenMs: number;
  lastRenewalToOpenMs: number;
  newTerm: number;
}

/** Counts every store call, to report requests per hour. */
class CountingStore implements LeaseStore {
  writes = 0;
  reads = 0;
  constructor(private readonly inner: LeaseStore) {}
  claim: LeaseStore["claim"] = (request) => (this.writes++, this.inner.claim(request));
  extend: LeaseStore["extend"] = (request) => (this.writes++, this.inner.extend(request));
  release: LeaseStore["release"] = (request) => (this.writes++, this.inner.release(request));
  markAnnounced: LeaseStore["markAnnounced"] = (request) => (this.writes++, this.inner.markAnnounced(request));
  read: LeaseStore["read"] = (site) => (this.reads++, this.inner.read(site));
}

async function failoverRun(store: LeaseStore, settings: Omit<LeaseSettings, "deploymentId" | "leaderElection">): Promise<RunResult> {
  const leaderSettings = resolveLeaseSettings({ ...settings, leaderElection: true, deploymentId: "leader" });
  const standbySettings = resolveLeaseSettings({ ...settings, leaderElection: true, deploymentId: "standby" });
  const leader = createLeaseGate(leaderSettings, { store, metrics: noMetrics });
  const standby = createLeaseGate(standbySettings, { store, metrics: noMetrics });
  let lastRenewalAt = 0;
  const recordingLeader = {
    acquireOrRenew: async () => {
      const sentAt = performance.now();
      const outcome = await leader.acquireOrRenew();
      if (outcome.holding) lastRenewalAt = sentAt;
      return outcome;
    },
  };

  const first = await recordingLeader.acquireOrRenew();
  if (!first.holding) throw new Error("the leader could not take the fresh lease");
  const leaderStop = new AbortController();
  const standbyStop = new AbortController();
  const far = performance.now() + 10 * 60_000;
  const leaderLoop = runLeaseKeeper({ lease: recordingLeader, clock: systemClock, until: far, intervalMs: settings.renewIntervalMs, signal: leaderStop.signal });
  let openedAt = 0;
  let newTerm = 0;
  // Separate deployments' keepers run at unrelated phases.
  await systemClock.sleep(Math.random() * settings.renewIntervalMs);
  const standbyLoop = runLeaseKeeper({
    lease: standby,
    clock: systemClock,
    until: far,
    intervalMs: settings.renewIntervalMs,
    signal: standbyStop.signal,
    onWon: async (term) => {
      await standby.assertOpen(term, 1_000);
      openedAt = performance.now();
      newTerm = term;
      standbyStop.abort();
    },
  });

  // Crash at a random phase of the leader's renewal cycle, after it has settled into the loop.
  await systemClock.sleep(settings.renewIntervalMs * (1 + Math.random()));
  leaderStop.abort();
  const crashedAt = performance.now();
  await Promise.all([leaderLoop, standbyLoop]);
  return { crashToOpenMs: Math.round(openedAt - crashedAt), lastRenewalToOpenMs: Math.round(openedAt - lastRenewalAt), newTerm };
}

async function idleRequests(store: LeaseStore, site: string) {
  const settings = { site, ...PROFILES[0] };
  const counters = { leader: new CountingStore(store), standby: new CountingStore(store) };
  // The site's first acquisition is not idle traffic; take it before counting.
  await createLeaseGate(resolveLeaseSettings({ ...settings, leaderElection: true, deploymentId: "leader" }), { store, metrics: noMetrics }).acquireOrRenew();
  const start = performance.now();
  async function scheduledKeeper(deploymentId: "leader" | "standby") {
    for (let tick = 0; tick * KEEPER_SCHEDULE_MS < IDLE_WINDOW_MS; tick++) {
      const tickAt = start + tick * KEEPER_SCHEDULE_MS + (deploymentId === "standby" ? 500 : 0);
      await systemClock.sleep(Math.max(0, tickAt - performance.now()));
      // Every scheduled run is a fresh invocation with no lease state of its own.
      const gate = createLeaseGate(resolveLeaseSettings({ ...settings, leaderElection: true, deploymentId }), {
        store: counters[deploymentId],
        metrics: noMetrics,
      });
      const until = Math.min(tickAt + KEEPER_RUN_MS, start + IDLE_WINDOW_MS);
      await runLeaseKeeper({ lease: gate, clock: systemClock, until, intervalMs: settings.renewIntervalMs, roundBudgetMs: 500 });
    }
  }
  await Promise.all([scheduledKeeper("leader"), scheduledKeeper("standby")]);
  const windowMs = IDLE_WINDOW_MS;
  const perHour = (count: number) => Math.round((count * 3_600_000) / windowMs);
  return {
    windowMs: Math.round(windowMs),
    leaderWrites: counters.leader.writes,
    standbyWrites: counters.standby.writes,
    reads: counters.leader.reads + counters.standby.reads,
    requestsPerHour: perHour(counters.leader.writes + counters.standby.writes + counters.leader.reads + counters.standby.reads),
    expectedPerHour: 2 * (3_600_000 / settings.renewIntervalMs),
  };
}

const summarise = (values: number[]) => ({
  min: Math.min(...values),
  max: Math.max(...values),
  mean: Math.round(values.reduce((sum, value) => sum + value, 0) / values.length),
});

async function main() {
  const dynamo = await startDynamoDbLocal();
  const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamo.url });
  try {
    await createLeaseTable(client, "bench-failover");
    const store = new DynamoDbLeaseStore({ client, tableName: "bench-failover" });
    const started = Date.now();
    const [profiles, idle] = await Promise.all([
      Promise.all(
        PROFILES.map(async (profile) => {
          const runs = await Promise.all(
            Array.from({ length: RUNS_PER_PROFILE }, (_, index) => failoverRun(store, { ...profile, site: `${profile.name}-${index}` })),
          );
          return {
            ...profile,
            runs,
            crashToOpenMs: summarise(runs.map((run) => run.crashToOpenMs)),
            lastRenewalToOpenMs: summarise(runs.map((run) => run.lastRenewalToOpenMs)),
            boundFromLastRenewalMs: {
              earliest: profile.leaseDurationMs + profile.skewBoundMs,
              latest: profile.leaseDurationMs + profile.skewBoundMs + profile.renewIntervalMs,
            },
          };
        }),
      ),
      idleRequests(store, "idle"),
    ]);
    const report = {
      generatedAt: new Date().toISOString(),
      environment: { store: "DynamoDB Local (in memory, loopback)", node: process.version, timeScale: "real time" },
      benchmarkWallClockMs: Date.now() - started,
      profiles,
      idle,
    };
    await mkdir("reports", { recursive: true });
    await writeFile("reports/failover.json", `${JSON.stringify(report, null, 2)}\n`);
    await writeFile("reports/failover.md", markdown(report));
    console.log(JSON.stringify(report, null, 2));
  } finally {
    client.destroy();
    await dynamo.stop();
  }
}

function markdown(report: {
  generatedAt: string;
  benchmarkWallClockMs: number;
  profiles: Array<{
    name: string;
    leaseDurationMs: number;
    renewIntervalMs: number;
    skewBoundMs: number;
    runs: RunResult[];
    crashToOpenMs: { min: number; max: number; mean: number };
    lastRenewalToOpenMs: { min: number; max: number; mean: number };
    boundFromLastRenewalMs: { earliest: number; latest: number };
  }>;
  idle: Awaited<ReturnType<typeof idleRequests>>;
}): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const rows = report.profiles.map(
    (profile) =>
      `| ${profile.name} | ${s(profile.leaseDurationMs)} / ${s(profile.renewIntervalMs)} / ${s(profile.skewBoundMs)} | ${profile.runs.length} | ` +
      `${s(profile.crashToOpenMs.min)} / ${s(profile.crashToOpenMs.mean)} / ${s(profile.crashToOpenMs.max)} | ` +
      `${s(profile.lastRenewalToOpenMs.min)} / ${s(profile.lastRenewalToOpenMs.mean)} / ${s(profile.lastRenewalToOpenMs.max)} | ` +
      `${s(profile.boundFromLastRenewalMs.earliest)} – ${s(profile.boundFromLastRenewalMs.latest)} |`,
  );
  const idle = report.idle;
  return [
    "# Lease failover benchmark",
    "",
    `Generated ${report.generatedAt} by \`npx tsx bench/failover.ts\` against DynamoDB Local on loopback, in real time (no time scaling); the whole run took ${s(report.benchmarkWallClockMs)}.`,
    "",
    "A leader and a standby each run the lease-keeper loop. The leader stops renewing at a random phase of its cycle",
    "(a crash: no release) and we time until the standby's gate opens (`assertOpen` on the new term succeeds).",
    "",
    "| profile | lease / renew / skew | runs | crash → standby open (min / mean / max) | leader's last renewal → standby open (min / mean / max) | expected from last renewal |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
    "The standby may take over once its clock is past `expiresAt + skew` (lease + skew after the leader's last renewal was sent)",
    "and it looks every renew interval, so from the last renewal the failover lands between lease + skew and lease + skew + renew.",
    "",
    "## Idle DynamoDB traffic (default profile, leader + 1 standby)",
    "",
    `Each deployment's keeper ran as the scheduled function does: a fresh invocation every minute looping ${s(KEEPER_RUN_MS)}, for ${s(idle.windowMs)}.`,
    "",
    `| leader writes | standby writes | reads | requests per hour (measured) | requests per hour (expected: 2 × 3600 / renew) |`,
    "|---|---|---|---|---|",
    `| ${idle.leaderWrites} | ${idle.standbyWrites} | ${idle.reads} | ${idle.requestsPerHour} | ${idle.expectedPerHour} |`,
    "",
    "Every lease call is a single conditional UpdateItem (a standby's failed condition also costs one write unit); reads",
    "only settle writes whose outcome was unknown. Provision, lifecycle and discover invocations add a write only when their",
    "gate finds no valid lease in that invocation. Costs are in docs/lease.md.",
    "",
  ].join("\n");
}

await main();
