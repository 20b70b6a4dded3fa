/**
 * Drives a started local stack to the end of a run: samples progress (waiting / in progress /
 * provisioned / failed, leader and term), optionally crashes the leading deployment after a delay
 * to show the failover, and ends when every node is provisioned or the timeout passes. A node is
 * provisioned once it acknowledged its restart; a node that is not is reported with the best reason
 * known (its dead letter's reason, its last error in the admission registry, or the last request
 * it refused).
 */
import { describeRow, describeTakeover, describeWait, registryView, type RegistryRow, type WaitGroup } from "./registry-view";
import { LOCAL_AWS } from "./services";
import type { LocalStack, LeaseView, DeadLetter } from "./stack";

/**
 * The counts of one sample. Every host is in exactly one of waiting, in progress, retrying, failed
 * and provisioned, so they add up to `total`.
 */
export interface ProgressSnapshot {
  elapsedMs: number;
  total: number;
  /** No provisioning request reached the host yet. */
  waiting: number;
  /** It got a request, has not acknowledged its restart, and no attempt on it failed yet. */
  inProgress: number;
  provisioned: number;
  /** Parked: failed at one step too many times in a row; its work is in the host-work DLQ. */
  failed: number;
  /** Its last attempt failed (the registry has its last error) and it will be tried again. */
  retrying: number;
  leader: string | undefined;
  term: number | undefined;
  invocations: number;
  crashed: string[];
  /** Set once nothing moved for STALL_MS: what the unfinished hosts wait for, from the registry; the groups add up to them. */
  waitingFor?: WaitGroup[];
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
  /**
   * From the first provisioning request to the last restart acknowledged: the time the hosts
   * took, without the start and a failover's wait after them. Undefined when none was provisioned.
   */
  provisioningMs: number | undefined;
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
  /** Epoch ms of the first provisioning request to any node. */
  firstRequestAt: number | undefined;

  constructor(private readonly stack: LocalStack) {}

  update(): void {
    const record = this.stack.fleet.record;
    for (; this.scanned < record.length; this.scanned++) {
      const entry = record[this.scanned];
      if (!entry || entry.agent === "discovery" || entry.agent === "") continue;
      this.touched.add(entry.identity);
      this.firstRequestAt = Math.min(this.firstRequestAt ?? entry.timeMs, entry.timeMs);
      if (entry.outcome !== 0) {
        this.lastRefusal.set(entry.identity, `${entry.agent}#${entry.action}: ${entry.statusmsg ?? entry.reason ?? String(entry.outcome)}`);
      } else if (entry.action === "restart" && !this.restartedAt.has(entry.identity)) {
        this.restartedAt.set(entry.identity, entry.timeMs);
      }
    }
  }

  /** The one bucket each host is in: provisioned first, then what the registry says, then whether a request reached it. */
  counts(identities: readonly string[], rows: ReadonlyMap<string, RegistryRow>) {
    const counts = { waiting: 0, inProgress: 0, provisioned: 0, failed: 0, retrying: 0 };
    for (const identity of identities) {
      const row = rows.get(identity);
      if (this.restartedAt.has(identity)) counts.provisioned++;
      else if (row?.state === "parked") counts.failed++;
      else if (row?.lastError !== undefined) counts.retrying++;
      else if (this.touched.has(identity)) counts.inProgress++;
      else counts.waiting++;
    }
    return counts;
  }

  provisioningMs(): number | undefined {
    if (this.firstRequestAt === undefined || this.restartedAt.size === 0) return undefined;
    let last = 0;
    for (const at of this.restartedAt.values()) last = Math.max(last, at);
    return last - this.firstRequestAt;
  }
}

/** The admission registry is read every few seconds for the retrying count: it is a Query of the whole site. */
const REGISTRY_EVERY_MS = 2_000;

/** After this long without a host moving, the progress says what the run waits for. */
const STALL_MS = 10_000;

/** Lease changes as the run saw them, and the failover's figures once the leader was crashed. */
class LeaseWatch {
  readonly changes: RunSummary["leaseChanges"] = [];
  failover: FailoverFigure | undefined;
  last: LeaseView | undefined;

  constructor(
    private readonly startedAt: number,
    private readonly say: (message: string) => void,
  ) {}

  observe(lease: LeaseView | undefined, now: number): void {
    if (lease && (lease.holder !== this.last?.holder || lease.term !== this.last?.term)) {
      this.changes.push({ atMs: now - this.startedAt, holder: lease.holder, term: lease.term });
      this.say(`lease: ${lease.holder} leads with term ${lease.term}`);
      const failover = this.failover;
      if (failover && failover.tookMs === undefined && lease.holder !== failover.killed) {
        failover.tookMs = now - this.startedAt - failover.killedAtMs;
        failover.newLeader = lease.holder;
        failover.newTerm = lease.term;
        this.say(`failover: ${lease.holder} took over ${(failover.tookMs / 1000).toFixed(1)} s after ${failover.killed} crashed`);
      }
    }
    this.last = lease;
  }

  /** Crashes the deployment holding the lease, once. */
  crashLeader(stack: LocalStack, now: number): void {
    const lease = this.last;
    const leader = lease && stack.deployments.find((deployment) => deployment.id === lease.holder);
    if (this.failover || !lease || !leader) return;
    leader.kill();
    this.failover = { killed: leader.id, killedAtMs: now - this.startedAt, newLeader: undefined, newTerm: undefined, tookMs: undefined };
    this.say(`crashed the leading deployment ${leader.id} (term ${lease.term})`);
  }
}

export async function runLocal(stack: LocalStack, options: RunOptions): Promise<RunSummary> {
  const startedAt = Date.now();
  const progress = new FleetProgress(stack);
  const identities = stack.fleet.identities;
  const total = identities.length;
  const leases = new LeaseWatch(startedAt, (message) => options.onEvent?.(message));
  let outcome: RunSummary["outcome"] = "timeout";
  let allDoneAt: number | undefined;

  const registry = registryView({ ...LOCAL_AWS, endpoint: stack.dynamoDb.url, table: stack.tables.admission, site: stack.site });
  let rows = new Map<string, RegistryRow>();
  let movedKey = "";
  let movedAt = startedAt;
  let rowsReadAt = 0;
  stack.start();
  for (;;) {
    const now = Date.now();
    progress.update();
    leases.observe(await stack.lease().catch(() => leases.last), now);
    if (now - rowsReadAt >= REGISTRY_EVERY_MS) {
      rows = await registry.rows().then((read) => new Map(read.map((row) => [row.identity, row])), () => rows);
      rowsReadAt = now;
    }
    if (options.killLeaderAfterMs !== undefined && now - startedAt >= options.killLeaderAfterMs) leases.crashLeader(stack, now);

    const counts = progress.counts(identities, rows);
    const moved = `${counts.provisioned}/${progress.touched.size}/${counts.failed}/${counts.retrying}`;
    if (moved !== movedKey) {
      movedKey = moved;
      movedAt = now;
    }
    const crashed = stack.deployments.filter((deployment) => deployment.crashed).map((deployment) => deployment.id);
    const failoverPending = options.killLeaderAfterMs !== undefined && leases.failover?.tookMs === undefined;
    const waits = now - movedAt >= STALL_MS ? whatTheRunWaitsFor(stack, { progress, rows, leases, crashed, failoverPending }, now) : undefined;
    options.onSnapshot?.({
      elapsedMs: now - startedAt,
      total,
      ...counts,
      leader: leases.last?.holder,
      term: leases.last?.term,
      invocations: stack.ledger.count(),
      crashed,
      ...(waits ? { waitingFor: waits } : {}),
    });

    if (options.signal?.aborted) {
      outcome = "interrupted";
      break;
    }
    if (counts.provisioned >= total) {
      allDoneAt ??= now;
      if (now - allDoneAt >= (options.lingerMs ?? 0) && !failoverPending) {
        outcome = "all-provisioned";
        break;
      }
    }
    if (counts.provisioned < total && counts.provisioned + counts.failed >= total) {
      outcome = "settled";
      options.onEvent?.(`every node is provisioned or parked: ${counts.provisioned} provisioned, ${counts.failed} parked in the DLQ`);
      break;
    }
    if (now - startedAt >= options.timeoutMs) break;
    await new Promise((resolve) => setTimeout(resolve, options.sampleEveryMs ?? 250));
  }

  return summarize(stack, { startedAt, outcome, progress, leases, registry, rows });
}

/** What a stalled run waits for: the unfinished hosts by cause, or, all provisioned, the takeover it crashed the leader for. */
function whatTheRunWaitsFor(
  stack: LocalStack,
  run: { progress: FleetProgress; rows: ReadonlyMap<string, RegistryRow>; leases: LeaseWatch; crashed: string[]; failoverPending: boolean },
  now: number,
): WaitGroup[] | undefined {
  const { progress, leases } = run;
  const unfinished = stack.fleet.identities.filter((identity) => !progress.restartedAt.has(identity));
  if (unfinished.length > 0) {
    return describeWait(unfinished, run.rows, { now, lease: leases.last, crashed: run.crashed, retryMaxDelayMs: stack.timings.retryMaxDelaySeconds * 1000 });
  }
  return run.failoverPending && leases.failover && leases.last ? [describeTakeover(leases.last, now)] : undefined;
}

/** The end of a run: the DLQs and the registry read once more, every unprovisioned node explained. */
async function summarize(
  stack: LocalStack,
  run: { startedAt: number; outcome: RunSummary["outcome"]; progress: FleetProgress; leases: LeaseWatch; registry: ReturnType<typeof registryView>; rows: Map<string, RegistryRow> },
): Promise<RunSummary> {
  const { progress, registry } = run;
  progress.update();
  const deadLetters = await stack.deadLetters().catch(() => []);
  const finalRows = await registry.rows().catch(() => [...run.rows.values()]);
  registry.close();
  const unprovisioned = unprovisionedNodes(stack.fleet.identities, progress, deadLetters, new Map(finalRows.map((row) => [row.identity, row])));
  return {
    outcome: run.outcome,
    elapsedMs: Date.now() - run.startedAt,
    total: stack.fleet.identities.length,
    provisioned: progress.restartedAt.size,
    unprovisioned,
    lost: unprovisioned.filter((node) => !node.deadLettered).map((node) => node.identity),
    deadLetters,
    leaseChanges: run.leases.changes,
    failover: run.leases.failover,
    invocations: stack.ledger.byFunction(),
    restartedAt: progress.restartedAt,
    startedAt: run.startedAt,
    provisioningMs: progress.provisioningMs(),
  };
}

/** Every node not provisioned, with its state, its registry entry in words and the best reason known. */
function unprovisionedNodes(
  identities: readonly string[],
  progress: FleetProgress,
  deadLetters: readonly DeadLetter[],
  known: ReadonlyMap<string, RegistryRow>,
): UnprovisionedNode[] {
  const lettered = new Map(deadLetters.filter((letter) => letter.identity).map((letter) => [letter.identity as string, letter]));
  const endedAt = Date.now();
  return identities
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
}
