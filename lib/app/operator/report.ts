/**
 * The operator's one vocabulary, for the status, reprovision and release functions
 * (./functions.ts) and for the `choria-provisioner` CLI (./site-operator.ts, ./renewal-operator.ts):
 * a deployment's status and how it is read, what admitting hosts again did, and the refusal of a
 * command this deployment cannot run now. The status function answers a projection of the same
 * status (StatusFunctionReport), not a report of its own.
 */
import type { AdmissionRegistry } from "../../admission/registry";
import type { HostExpiry, RegistrySummary } from "../../admission/site-listing";
import { messageOf, ProvisionerError } from "../../errors";
import { describeLease, leadsAt, type LeaseDescription } from "../../lease/stored-lease";
import type { LeaseItem, LeaseStore } from "../../ports/lease-store";
import type { PauseState, PauseStore } from "../../ports/pause-store";
import type { Clock } from "../../ports/clock";
import type { MessageQueue, QueueCounts } from "../use-case-ports";
import { renewalReport, type RenewalReport } from "../renewal-state";
import { type RenewalState, type RenewalStore } from "../use-case-ports";
import { capacitySettings, renewalCapacity, type RenewalCapacity, type RenewalCapacitySettings } from "../renewal-capacity";
import type { RenewCalendar } from "../../config/renew-calendar";

export interface StatusQueues {
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
}

type QueueName = keyof StatusQueues;

/** A queue's depth, or why it could not be read. */
type QueueDepth = QueueCounts | { error: string };

/** The four queues' depths at once; one that cannot be read says why instead of failing the report. */
async function queueDepths(queues: StatusQueues): Promise<Record<QueueName, QueueDepth>> {
  const depth = (queue: MessageQueue): Promise<QueueDepth> => queue.counts().catch((error: unknown) => ({ error: messageOf(error) }));
  const [hostWork, hostWorkDlq, lifecycle, lifecycleDlq] = await Promise.all([
    depth(queues.hostWork),
    depth(queues.hostWorkDlq),
    depth(queues.lifecycle),
    depth(queues.lifecycleDlq),
  ]);
  return { hostWork, hostWorkDlq, lifecycle, lifecycleDlq };
}

/**
 * What a deployment is to the site's election now: `leader` holds an unexpired lease, `standby`
 * waits while another deployment holds one, `candidate` finds nobody leading (the lease was never
 * taken, was released or expired) and takes it at its next round unless paused. Without leader
 * election every deployment works, as a leader does.
 */
export type DeploymentRole = "leader" | "standby" | "candidate";

export function roleOf(item: LeaseItem | undefined, deploymentId: string, now: number): DeploymentRole {
  if (leadsAt(item, deploymentId, now)) return "leader";
  return item !== undefined && leadsAt(item, item.holder, now) ? "standby" : "candidate";
}

export interface LeaseView extends LeaseDescription {
  /** Ms until the stored expiry on this machine's clock; negative once past. */
  expiresInMs: number | null;
}

/** The stored lease as lib/lease describes it, with the time left on this machine's clock. */
export function leaseView(item: LeaseItem | undefined, deploymentId: string, now: number): LeaseView {
  const lease = describeLease(item, deploymentId, now);
  return { ...lease, expiresInMs: lease.expiresAt === null ? null : lease.expiresAt - now };
}

export type RenewSettings = Omit<RenewalCapacitySettings, "outOfServiceMs"> & { calendar?: RenewCalendar };
/** Whether the maintenance windows and freezes let renewal send now, and if not, from when (none within 32 days: absent). */
interface WindowsReport {
  open: boolean;
  nextAllowedAt?: number;
}
export type SiteRenewalReport = RenewalReport & { capacity?: RenewalCapacity; windows?: WindowsReport };

/** How far ahead status looks for the next allowed moment: a freeze lasts at most 31 days. */
const NEXT_ALLOWED_WITHIN_MS = 32 * 24 * 3_600_000;

/** Renewal as status shows it, the same from every deployment and the CLI: with the renew settings, whether it keeps up and when it may send. */
function siteRenewalReport(hosts: readonly HostExpiry[], state: RenewalState, site: string, now: number, renew: RenewSettings | undefined): SiteRenewalReport {
  const report: SiteRenewalReport = renewalReport(hosts, state, site, now, renew?.before);
  if (renew) report.capacity = renewalCapacity(hosts, now, capacitySettings(renew, state), new Set(Object.keys(state.inFlight)));
  if (renew?.calendar?.restricted) {
    const open = renew.calendar.allowedAt(now);
    const next = open ? undefined : renew.calendar.nextAllowed(now, NEXT_ALLOWED_WITHIN_MS);
    report.windows = { open, ...(next === undefined ? {} : { nextAllowedAt: next }) };
  }
  return report;
}

/** A deployment's status: what the CLI's `status` shows, and what the status function answers a projection of. */
export interface DeploymentStatus {
  site: string;
  deploymentId: string;
  role: DeploymentRole;
  paused: boolean;
  pause: PauseState | undefined;
  lease: LeaseView;
  queues: Record<QueueName, QueueDepth>;
  /** `byState` counts live entries only; `expired` the entries past their expiry the TTL has not deleted yet. */
  registry: RegistrySummary & { expired: number };
  /** What expires when, renewal's own state, and (given the deployment's renew settings) whether renewal keeps up. */
  renewal?: SiteRenewalReport;
}

/** Where a deployment's status is read from; the CLI reads them all, the status function what its deployment has. */
export interface StatusSources {
  site: string;
  deploymentId: string;
  /** false: every deployment works, as a leader does, whatever the lease says (default true). */
  leaderElection?: boolean;
  /** Absent when leader election is off: no lease is read. */
  leaseStore?: Pick<LeaseStore, "read">;
  /** Absent: the switch is not read, and the deployment is shown unpaused. */
  pauseStore?: Pick<PauseStore, "read">;
  registry: Pick<AdmissionRegistry, "summary" | "expiries">;
  queues: StatusQueues;
  clock: Clock;
  /**
   * The site's registry entries past their `expiresAt` at `now`: no rule looks at them any more and
   * the table's TTL deletes them in its own time (up to days), so status counts them as expired,
   * not as queued or provisioning work.
   */
  expiredEntries?: (now: number) => Promise<Array<{ identity: string; state: string }>>;
  /** Renewal's state; when given, status shows the credentials' expiry and renewal. */
  renewalStore?: RenewalStore;
  /** The deployment's renew settings: where each host's window falls, and whether renewal keeps up (none: the default window, no capacity). */
  renew?: RenewSettings;
}

/** The registry's counts with the entries past their expiry counted apart, not as live work. */
function liveRegistry(summary: RegistrySummary, expired: ReadonlyArray<{ state: string }>): DeploymentStatus["registry"] {
  const byState = { ...summary.byState };
  for (const entry of expired) {
    const state = entry.state as keyof typeof byState;
    if (Object.hasOwn(byState, state)) byState[state] = Math.max(0, byState[state] - 1);
  }
  return { ...summary, byState, expired: expired.length };
}

/** The deployment's status: the stored lease as lib/lease describes it, the pause switch, queue depths, registry counts and renewal. */
export async function readDeploymentStatus(sources: StatusSources & { renewalStore: RenewalStore }): Promise<DeploymentStatus & { renewal: SiteRenewalReport }>;
export async function readDeploymentStatus(sources: StatusSources): Promise<DeploymentStatus>;
export async function readDeploymentStatus(sources: StatusSources): Promise<DeploymentStatus> {
  const { site, deploymentId } = sources;
  const now = sources.clock.now();
  const [leaseItem, pause, queues, summary, expired, hosts, renewalState] = await Promise.all([
    sources.leaseStore ? sources.leaseStore.read(site) : Promise.resolve(undefined),
    sources.pauseStore ? sources.pauseStore.read(site, deploymentId) : Promise.resolve(undefined),
    queueDepths(sources.queues),
    sources.registry.summary(),
    sources.expiredEntries ? sources.expiredEntries(now) : Promise.resolve([]),
    sources.renewalStore ? sources.registry.expiries() : Promise.resolve([]),
    sources.renewalStore?.read(site),
  ]);
  const role = sources.leaderElection === false ? "leader" : roleOf(leaseItem, deploymentId, now);
  const renewal = renewalState && siteRenewalReport(hosts, renewalState.state, site, now, sources.renew);
  return {
    site,
    deploymentId,
    role,
    paused: pause?.paused === true,
    pause,
    lease: leaseView(leaseItem, deploymentId, now),
    queues,
    registry: liveRegistry(summary, expired),
    ...(renewal ? { renewal } : {}),
  };
}

/** A host not admitted again, and why. */
export interface Refusal {
  identity: string;
  reason: string;
}

/**
 * What admitting hosts again under the current term did, the same from the reprovision function,
 * the CLI's `reprovision` and its `dlq requeue` (whose refusals also name poison letters).
 */
export interface ReadmitResult<Refused extends { reason: string } = Refusal> {
  /** The term the hosts were admitted under; null when this deployment leads none (every host refused). */
  term: number | null;
  admitted: string[];
  refused: Refused[];
}

/** The command cannot run on this deployment now (not the leader, paused); says why. */
export class OperatorRefusal extends ProvisionerError {}
