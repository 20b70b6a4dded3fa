/**
 * The operator's use cases, behind the status, reprovision and release functions and the
 * `choria-provisioner` CLI (lib/operator/operations.ts): the deployment's status (lease, queue
 * depths, registry), admitting hosts again at once under the current term, and giving the lease up.
 */
import type { AdmissionRegistry, RegistrySummary } from "../admission/registry";
import { messageOf } from "../errors";
import { describeLease, type LeaseDescription, type LeaseStore } from "../lease/lease";
import { METRIC, type Clock, type Logger, type Metrics } from "../ports";
import type { AdmissionFlow } from "./admission-flow";
import type { MessageQueue, QueueCounts } from "./ports";
import { renewalReport, type RenewalReport, type RenewalStore } from "./renewal-state";

export interface StatusQueues {
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
}

export type QueueName = keyof StatusQueues;

/** A queue's depth, or why it could not be read. */
export type QueueDepth = QueueCounts | { error: string };

export interface StatusReport {
  site: string;
  deploymentId: string;
  leaderElection: boolean;
  lease: LeaseDescription;
  queues: Record<QueueName, QueueDepth>;
  registry: RegistrySummary;
  /** What expires when, and renewal's own state. */
  renewal: RenewalReport;
}

export interface StatusDeps {
  site: string;
  deploymentId: string;
  leaderElection: boolean;
  /** Absent when leader election is off. */
  leaseStore?: Pick<LeaseStore, "read">;
  registry: Pick<AdmissionRegistry, "summary" | "expiries">;
  renewalStore: RenewalStore;
  queues: StatusQueues;
  clock: Clock;
  /** When given, the paused gauge is reported from the lease read. */
  metrics?: Metrics;
}

/** The four queues' depths at once; one that cannot be read says why instead of failing the report. */
export async function queueDepths(queues: StatusQueues): Promise<Record<QueueName, QueueDepth>> {
  const depth = (queue: MessageQueue): Promise<QueueDepth> => queue.counts().catch((error: unknown) => ({ error: messageOf(error) }));
  const [hostWork, hostWorkDlq, lifecycle, lifecycleDlq] = await Promise.all([
    depth(queues.hostWork),
    depth(queues.hostWorkDlq),
    depth(queues.lifecycle),
    depth(queues.lifecycleDlq),
  ]);
  return { hostWork, hostWorkDlq, lifecycle, lifecycleDlq };
}

/** The deployment's status: the stored lease as lib/lease describes it, queue depths and registry counts. */
export async function status(deps: StatusDeps): Promise<StatusReport> {
  const [leaseItem, queues, registry, expiries, renewalState] = await Promise.all([
    deps.leaseStore ? deps.leaseStore.read(deps.site) : Promise.resolve(undefined),
    queueDepths(deps.queues),
    deps.registry.summary(),
    deps.registry.expiries(),
    deps.renewalStore.read(deps.site),
  ]);
  const now = deps.clock.now();
  const lease = describeLease(leaseItem, deps.deploymentId, now);
  deps.metrics?.gauge(METRIC.paused, !deps.leaderElection || lease.heldByThisDeployment ? 0 : 1);
  const renewal = renewalReport(expiries, renewalState.state, now);
  return { site: deps.site, deploymentId: deps.deploymentId, leaderElection: deps.leaderElection, lease, queues, registry, renewal };
}

export interface ReprovisionResult {
  admitted: string[];
  rejected: Array<{ identity: string; reason: string }>;
}

export interface ReprovisionDeps {
  /** The term to admit under; undefined while this deployment does not lead (the lease gate's currentTerm). */
  currentTerm(): Promise<number | undefined>;
  admission: Pick<AdmissionFlow, "readmit">;
  logger: Logger;
}

/** Admits the hosts again at once under the current term, whatever they did before, unless one is being provisioned. */
export async function reprovision(deps: ReprovisionDeps, identities: readonly string[]): Promise<ReprovisionResult> {
  const result: ReprovisionResult = { admitted: [], rejected: [] };
  const term = await deps.currentTerm();
  if (term === undefined) {
    for (const identity of new Set(identities)) result.rejected.push({ identity, reason: "paused: this deployment does not hold the lease" });
    return result;
  }
  for (const outcome of await deps.admission.readmit(identities, term)) {
    if (outcome.queued) result.admitted.push(outcome.identity);
    else result.rejected.push({ identity: outcome.identity, reason: outcome.reason });
  }
  deps.logger.info("operator reprovision", { term, admitted: result.admitted.length, rejected: result.rejected.length });
  return result;
}

export interface ReleaseDeps {
  leaderElection: boolean;
  /** Gives the term up on behalf of this deployment (the lease gate's release, or lib/lease releaseOnBehalf). */
  release(): Promise<boolean>;
  logger: Logger;
}

/** Gives up this deployment's lease so a standby takes over without waiting for expiry. */
export async function release(deps: ReleaseDeps): Promise<{ released: boolean }> {
  if (!deps.leaderElection) return { released: false };
  const released = await deps.release();
  deps.logger.info("released the lease on operator request", { released });
  return { released };
}
