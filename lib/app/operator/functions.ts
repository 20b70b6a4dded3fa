/**
 * What the status, reprovision and release functions call: the deployment's status (lease, queue
 * depths, registry, renewal), admitting hosts again at once under the current term, and giving the
 * lease up. `reprovision` is also the CLI's (./site-operator.ts): the same refusals, the same result.
 *
 * Work is only ever (re)admitted under the lease term this deployment holds right now: a host
 * admitted under an older term would be discarded as stale.
 */
import type { AdmissionRegistry } from "../../admission/registry";
import type { RegistrySummary } from "../../admission/site-listing";
import { identityProblem } from "../../choria/identity";
import type { LeaseDescription } from "../../lease/stored-lease";
import type { LeaseStore } from "../../ports/lease-store";
import { METRIC } from "../../ports/metric-names";
import type { Clock } from "../../ports/clock";
import type { Logger } from "../../ports/logger";
import type { Metrics } from "../../ports/metrics";
import type { AdmissionFlow } from "../admission-flow";
import type { RenewalStore } from "../use-case-ports";
import { readDeploymentStatus, type DeploymentStatus, type ReadmitResult, type RenewSettings, type SiteRenewalReport, type StatusQueues } from "./report";

export interface StatusDeps {
  site: string;
  deploymentId: string;
  leaderElection: boolean;
  /** Absent when leader election is off. */
  leaseStore?: Pick<LeaseStore, "read">;
  registry: Pick<AdmissionRegistry, "summary" | "expiries">;
  renewalStore: RenewalStore;
  /** The deployment's renew settings: where each host's window falls, and whether renewal keeps up (none: the default window, no capacity). */
  renew?: RenewSettings;
  queues: StatusQueues;
  clock: Clock;
  /** When given, the paused gauge is reported from the lease read. */
  metrics?: Metrics;
}

/**
 * What the status function answers: the deployment's status as the CLI reads it, less the pause
 * switch and the expired entries (it reads neither) and the countdown, with whether it runs a
 * leader election at all.
 */
export type StatusFunctionReport = Pick<DeploymentStatus, "site" | "deploymentId" | "role" | "queues"> & {
  leaderElection: boolean;
  lease: LeaseDescription;
  registry: RegistrySummary;
  renewal: SiteRenewalReport;
};

/** The status function's answer from the deployment's status, in the order its JSON has always had. */
function statusFunctionReport(status: DeploymentStatus & { renewal: SiteRenewalReport }, leaderElection: boolean): StatusFunctionReport {
  const { expiresInMs: _countdown, ...lease } = status.lease;
  const { expired: _expired, ...registry } = status.registry;
  return { site: status.site, deploymentId: status.deploymentId, leaderElection, role: status.role, lease, queues: status.queues, registry, renewal: status.renewal };
}

/** The deployment's status: the stored lease as lib/lease describes it, queue depths, registry counts and renewal. */
export async function status(deps: StatusDeps): Promise<StatusFunctionReport> {
  const report = await readDeploymentStatus({
    site: deps.site,
    deploymentId: deps.deploymentId,
    leaderElection: deps.leaderElection,
    ...(deps.leaseStore ? { leaseStore: deps.leaseStore } : {}),
    registry: deps.registry,
    queues: deps.queues,
    clock: deps.clock,
    renewalStore: deps.renewalStore,
    ...(deps.renew ? { renew: deps.renew } : {}),
  });
  deps.metrics?.gauge(METRIC.paused, !deps.leaderElection || report.lease.heldByThisDeployment ? 0 : 1);
  return statusFunctionReport(report, deps.leaderElection);
}

export interface ReprovisionDeps {
  /** The term to admit under; undefined while this deployment does not lead (the lease gate's currentTerm). */
  currentTerm(): Promise<number | undefined>;
  /** Why every host is refused when currentTerm gives none. */
  notLeading: string;
  admission: Pick<AdmissionFlow, "readmit">;
  registry: Pick<AdmissionRegistry, "stateOf">;
  /** How the caller overrides the refusal of unknown and provisioned hosts (`--force`, `"force": true`). */
  forceHint: string;
  logger: Logger;
}

/**
 * Admits the hosts for provisioning now under the current term (overriding the once-per-interval
 * rule and a park), unless one is being provisioned. It does not send a configured node back to
 * provisioning mode (the Choria agent's `reprovision` action does that): the work only succeeds on a
 * node in provisioning mode. So, unless `force`, a host the registry does not know (never seen, or
 * seen so long ago that its entry expired) or has just provisioned is refused, with why.
 */
export async function reprovision(deps: ReprovisionDeps, identities: readonly string[], options: { force?: boolean } = {}): Promise<ReadmitResult> {
  const unique = [...new Set(identities)];
  const term = await deps.currentTerm();
  if (term === undefined) return { term: null, admitted: [], refused: unique.map((identity) => ({ identity, reason: deps.notLeading })) };
  const result: ReadmitResult = { term, admitted: [], refused: [] };
  const wanted: string[] = [];
  for (const identity of unique) {
    // A name that is no identity at all is refused by the admission itself, saying why.
    const refusal = options.force || identityProblem(identity) ? undefined : reprovisionRefusal(await deps.registry.stateOf(identity), deps.forceHint);
    if (refusal) result.refused.push({ identity, reason: refusal });
    else wanted.push(identity);
  }
  for (const outcome of await deps.admission.readmit(wanted, term)) {
    if (outcome.queued) result.admitted.push(outcome.identity);
    else result.refused.push({ identity: outcome.identity, reason: outcome.reason });
  }
  deps.logger.info("operator reprovision", { term, admitted: result.admitted.length, refused: result.refused.length, force: options.force === true });
  return result;
}

function reprovisionRefusal(state: string | undefined, forceHint: string): string | undefined {
  if (state === undefined) {
    return `not known to the registry (never discovered, or its entry expired): admit it only if it is in provisioning mode now (${forceHint})`;
  }
  if (state === "provisioned") {
    return `already provisioned: it left provisioning mode and would not answer; put it back in provisioning mode first, then ${forceHint}`;
  }
  return undefined;
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
