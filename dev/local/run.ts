/**
 * Drives a started local stack to the end of a run: samples progress (waiting / in progress /
 * provisioned / failed, leader and term), optionally crashes the leading deployment after a delay
 * to show the failover, and ends when every node is provisioned or the timeout passes. A node is
 * provisioned once it acknowledged its restart; a node that is not is reported with the best reason
 * known (its dead letter's reason, its last error in the admission registry, or the last request
 * it refused).
 */
import { describeRow, describeWait, registryView, type RegistryRow } from "./registry-view";
import { LOCAL_AWS } from "./services";
import type { LocalStack, LeaseView, DeadLetter } from "./stack";

export interface ProgressSnapshot {
  elapsedMs: number;
  total: number;
  waiting: number;
  inProgress: number;
  provisioned: number;
  /** Dead-lettered host work (approximate during the run): parked hosts and poison. */
  failed: number;
  /** Hosts whose last attempt failed and that will be tried again (registry entries with a last error, not parked). */
  retrying: number;
  leader: string | undefined;
  term: number | undefined;
  invocations: number;
  crashed: string[];
  /** Set once nothing moved for STALL_MS: what the unfinished hosts wait for, from the registry. */
  waitingFor?: string;
}

interface FailoverFigure {
  killed: string;
  killedAtMs: number;
  newLeader: string | undefined;
  newTerm: number | undefined;
  /** Crash to the standby's lease claim being visible in the table; undefined if it never happened. */
  tookMs: number | undefined;
}

interface UnprovisionedNode {
  identity: string;
  reason: string;
  deadLettered: boolean;
  /**
   * parked (in the DLQ), retrying (failed, will be tried again), claimed (an invocation holds it),
   * queued (admitted, its work not yet taken), in progress (requests seen, no registry entry), or
   * never contacted (neither).
   */
  state: "parked" | "retrying" | "claimed" | "queued" | "in progress" | "never contacted";
  /** Its registry entry in words: state, term, claim, admission age; or "not in the registry". */
  registry: string;
  /** The step of its last hard failure and how many in a row, when the registry knows. */
  failedStep?: string;
  failures?: number;
}

export interface RunSummary {
  /** settled: every node is provisioned or parked in the DLQ with its reason; nothing is left to try. */
  outcome: "all-provisioned" | "settled" | "timeout" | "interrupted";
  elapsedMs: number;
  total: number;
  provisioned: number;
  unprovisioned: UnprovisionedNode[];
  /** Unprovisioned nodes with no dead letter: nothing records why (the "lost" hosts). */
  lost: string[];
  deadLetters: DeadLetter[];
  leaseChanges: Array<{ atMs: number; holder: string; term: number }>;
  failover: FailoverFigure | undefined;
  invocations: Record<string, { invocations: number; failed: number; gbSeconds: number }>;
  /** Epoch ms each node acknowledged its restart. */
  restartedAt: Map<string, number>;
  startedAt: number;
}

export interface RunOptions {
  timeoutMs: number;
  /** Crash the deployment holding the lease this long after the start. */
  killLeaderAfterMs?: number;
  sampleEveryMs?: number;
  onSnapshot?: (snapshot: ProgressSnapshot) => void;
  onEvent?: (message: string) => void;
  /** Ends the run early (Ctrl-C). */
  signal?: AbortSignal;
  /** Keep running this long after every node is provisioned (to watch a failover). Default 0. */
  lingerMs?: number;
}

/** Follows the fleet's request record incrementally. */
class FleetProgress {
  private scanned = 0;
  readonly touched = new Set<string>();
  readonly lastRefusal = new Map<string, string>();
  readonly restartedAt = new Map<string, number>();

  constructor(private readonly stack: LocalStack) {}

  update(): void {
    const record = this.stack.fleet.record;
    for (; this.scanned < record.length; this.scanned++) {
      const entry = record[this.scanned];
      if (!entry || entry.agent === "discovery" || entry.agent === "") continue;
      this.touched.add(entry.identity);
      if (entry.outcome !== 0) {
        this.lastRefusal.set(entry.identity, `${entry.agent}#${entry.action}: ${entry.statusmsg ?? entry.reason ?? String(entry.outcome)}`);
      } else if (entry.action === "restart" && !this.restartedAt.has(entry.identity)) {
        this.restartedAt.set(entry.identity, entry.timeMs);
      }
    }
  }
}

/** The admission registry is read every few seconds for the retrying count: it is a Query of the whole site. */
const REGISTRY_EVERY_MS = 2_000;

/** After this long without a host moving, the progress says what the run waits for. */
const STALL_MS = 10_000;

export async function runLocal(stack: LocalStack, options: RunOptions): Promise<RunSummary> {
  const startedAt = Date.now();
  const progress = new FleetProgress(stack);
  const total = stack.fleet.identities.length;
  const leaseChanges: RunSummary["leaseChanges"] = [];
  let failover: FailoverFigure | undefined;
  let lastLease: LeaseView | undefined;
  let failed = 0;
  let outcome: RunSummary["outcome"] = "timeout";
  let allDoneAt: number | undefined;
  const say = (message: string) => options.onEvent?.(message);

  const registry = registryView({ ...LOCAL_AWS, endpoint: stack.dynamoDb.url, table: stack.tables.admission, site: stack.site });
  let rows: RegistryRow[] = [];
  let movedKey = "";
  let movedAt = startedAt;
  let rowsReadAt = 0;
  stack.start();
  for (;;) {
    const now = Date.now();
    progress.update();
    const lease = await stack.lease().catch(() => lastLease);
    if (lease && (lease.holder !== lastLease?.holder || lease.term !== lastLease?.term)) {
      leaseChanges.push({ atMs: now - startedAt, holder: lease.holder, term: lease.term });
      say(`lease: ${lease.holder} leads with term ${lease.term}`);
      if (failover && failover.tookMs === undefined && lease.holder !== failover.killed) {
        failover.tookMs = now - startedAt - failover.killedAtMs;
        failover.newLeader = lease.holder;
        failover.newTerm = lease.term;
        say(`failover: ${lease.holder} took over ${(failover.tookMs / 1000).toFixed(1)} s after ${failover.killed} crashed`);
      }
    }
    lastLease = lease;
    failed = await stack.deadLetterCount().catch(() => failed);
    if (now - rowsReadAt >= REGISTRY_EVERY_MS) {
      rows = await registry.rows().catch(() => rows);
      rowsReadAt = now;
    }

    if (options.killLeaderAfterMs !== undefined && !failover && now - startedAt >= options.killLeaderAfterMs && lease) {
      const leader = stack.deployments.find((deployment) => deployment.id === lease.holder);
      if (leader) {
        leader.kill();
        failover = { killed: leader.id, killedAtMs: now - startedAt, newLeader: undefined, newTerm: undefined, tookMs: undefined };
        say(`crashed the leading deployment ${leader.id} (term ${lease.term})`);
      }
    }

    const provisioned = progress.restartedAt.size;
    const moved = `${provisioned}/${progress.touched.size}/${failed}`;
    if (moved !== movedKey) {
      movedKey = moved;
      movedAt = now;
    }
    const unfinished = () => stack.fleet.identities.filter((identity) => !progress.restartedAt.has(identity));
    options.onSnapshot?.({
      elapsedMs: now - startedAt,
      total,
      provisioned,
      inProgress: [...progress.touched].filter((identity) => !progress.restartedAt.has(identity)).length,
      waiting: total - progress.touched.size,
      failed,
      retrying: rows.filter((row) => row.lastError !== undefined && row.state !== "parked" && !progress.restartedAt.has(row.identity)).length,
      leader: lease?.holder,
      term: lease?.term,
      invocations: stack.ledger.count(),
      crashed: stack.deployments.filter((deployment) => deployment.crashed).map((deployment) => deployment.id),
      ...(now - movedAt >= STALL_MS && provisioned < total
        ? { waitingFor: describeWait(unfinished(), new Map(rows.map((row) => [row.identity, row])), now) }
        : {}),
    });

    if (options.signal?.aborted) {
      outcome = "interrupted";
      break;
    }
    if (provisioned >= total) {
      allDoneAt ??= now;
      const failoverPending = options.killLeaderAfterMs !== undefined && (!failover || failover.tookMs === undefined);
      if (now - allDoneAt >= (options.lingerMs ?? 0) && !failoverPending) {
        outcome = "all-provisioned";
        break;
      }
    }
    const parked = rows.filter((row) => row.state === "parked" && !progress.restartedAt.has(row.identity)).length;
    if (provisioned < total && provisioned + parked >= total) {
      outcome = "settled";
      say(`every node is provisioned or parked: ${provisioned} provisioned, ${parked} parked in the DLQ`);
      break;
    }
    if (now - startedAt >= options.timeoutMs) break;
    await new Promise((resolve) => setTimeout(resolve, options.sampleEveryMs ?? 250));
  }

  progress.update();
  const deadLetters = await stack.deadLetters().catch(() => []);
  rows = await registry.rows().catch(() => rows);
  registry.close();
  const lettered = new Map(deadLetters.filter((letter) => letter.identity).map((letter) => [letter.identity as string, letter]));
  const known = new Map(rows.map((row) => [row.identity, row]));
  const endedAt = Date.now();
  const unprovisioned: UnprovisionedNode[] = stack.fleet.identities
    .filter((identity) => !progress.restartedAt.has(identity))
    .map((identity) => {
      const letter = lettered.get(identity);
      const row = known.get(identity);
      const touched = progress.touched.has(identity) || row?.lastError !== undefined;
      const claimed = row?.claimedUntil !== undefined && row.claimedUntil > endedAt;
      const state: UnprovisionedNode["state"] =
        letter || row?.state === "parked"
          ? "parked"
          : claimed
            ? "claimed"
            : row?.lastError !== undefined
              ? "retrying"
              : row?.state === "queued"
                ? "queued"
                : touched || row
                  ? "in progress"
                  : "never contacted";
      // No error anywhere: the state (and the registry column) say all there is; "-" rather than repeat it.
      const reason = letter?.reason ?? row?.lastError ?? progress.lastRefusal.get(identity) ?? (state === "never contacted" ? state : "-");
      return {
        identity,
        reason,
        deadLettered: letter !== undefined,
        state,
        registry: describeRow(row, endedAt),
        ...(row?.failedStep === undefined ? {} : { failedStep: row.failedStep, failures: row.failures ?? 0 }),
      };
    });
  return {
    outcome,
    elapsedMs: Date.now() - startedAt,
    total,
    provisioned: progress.restartedAt.size,
    unprovisioned,
    lost: unprovisioned.filter((node) => !node.deadLettered).map((node) => node.identity),
    deadLetters,
    leaseChanges,
    failover,
    invocations: stack.ledger.byFunction(),
    restartedAt: progress.restartedAt,
    startedAt,
  };
}
