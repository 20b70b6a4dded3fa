/**
 * The operator's use cases, one module for the status, reprovision and release functions and for
 * the `choria-provisioner` CLI (cli/): the deployment's status (lease, queue depths, registry),
 * admitting hosts again at once under the current term, giving the lease up, and the CLI's own
 * commands over the same ports (the election, the host-work dead letters and requeueing them, the
 * pause switch, renewal by hand). They take ports only: the lease and pause stores, the admission
 * registry, the queues, the renewal store and a clock.
 *
 * Work is only ever (re)admitted under the lease term this deployment holds right now. A dead
 * letter still carries the term it was first admitted under; sent back as it is (a console
 * redrive), the provisioner would discard it as stale. Requeueing admits the host afresh instead.
 *
 * Renewal by hand: the CLI reaches no broker, so a request is written into the site's renewal
 * state under the term this deployment leads with, and the leader's next `renew` run (every
 * minute) sends the hosts reprovision through the pause gate like every renewal; a request of an
 * older term is dropped there. Refused on a standby and on a paused or released deployment
 * (Operator.currentTerm), and when no leader's renew run was seen lately (renewRunsMissing):
 * nothing would carry the request out.
 *
 * `reprovision` is one use case for the function and the CLI: the same refusals, the same result.
 */
import type { AdmissionRegistry, HostExpiry, RegistrySummary } from "../admission/registry";
import { identityProblem } from "../choria/identity";
import { messageOf, ProvisionerError } from "../errors";
import { describeLease, leadsAt, type LeaseDescription, type LeaseItem, type LeaseStore } from "../lease/store";
import type { PauseState, PauseStore } from "../lease/pause";
import { METRIC, silentLogger, type Clock, type HostWork, type Logger, type Metrics } from "../ports";
import { AdmissionFlow } from "./admission-flow";
import { decodeHostWork } from "./host-work-message";
import type { MessageQueue, QueueCounts } from "./use-case-ports";
import {
  renewalReport,
  renewRunsMissing,
  requestedHosts,
  updateRenewalState,
  type RenewalReport,
  type RenewalState,
  type RenewalStore,
  type RenewSelection,
} from "./renewal-state";
import { capacitySettings, renewalCapacity, type RenewalCapacity, type RenewalCapacitySettings } from "./renewal-capacity";

export interface StatusQueues {
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
}

type QueueName = keyof StatusQueues;

/** A queue's depth, or why it could not be read. */
type QueueDepth = QueueCounts | { error: string };

/**
 * What a deployment is to the site's election now: `leader` holds an unexpired lease, `standby`
 * waits while another deployment holds one, `candidate` finds nobody leading (the lease was never
 * taken, was released or expired) and takes it at its next round unless paused. Without leader
 * election every deployment works, as a leader does.
 */
export type DeploymentRole = "leader" | "standby" | "candidate";

function roleOf(item: LeaseItem | undefined, deploymentId: string, now: number): DeploymentRole {
  if (leadsAt(item, deploymentId, now)) return "leader";
  return item !== undefined && leadsAt(item, item.holder, now) ? "standby" : "candidate";
}

export interface StatusReport {
  site: string;
  deploymentId: string;
  leaderElection: boolean;
  role: DeploymentRole;
  lease: LeaseDescription;
  queues: Record<QueueName, QueueDepth>;
  registry: RegistrySummary;
  /** What expires when, renewal's own state, and (given the deployment's renew settings) whether renewal keeps up. */
  renewal: SiteRenewalReport;
}

type RenewSettings = Omit<RenewalCapacitySettings, "outOfServiceMs">;
export type SiteRenewalReport = RenewalReport & { capacity?: RenewalCapacity };

/** Renewal as status shows it, the same from every deployment and the CLI: with the renew settings, whether it keeps up. */
function siteRenewalReport(hosts: readonly HostExpiry[], state: RenewalState, site: string, now: number, renew: RenewSettings | undefined): SiteRenewalReport {
  const report: SiteRenewalReport = renewalReport(hosts, state, site, now, renew?.before);
  if (renew) report.capacity = renewalCapacity(hosts, now, capacitySettings(renew, state), new Set(Object.keys(state.inFlight)));
  return report;
}

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
  const renewal = siteRenewalReport(expiries, renewalState.state, deps.site, now, deps.renew);
  const role = deps.leaderElection ? roleOf(leaseItem, deps.deploymentId, now) : "leader";
  return { site: deps.site, deploymentId: deps.deploymentId, leaderElection: deps.leaderElection, role, lease, queues, registry, renewal };
}

/** What `reprovision` did, the same from the function and the CLI. */
export interface ReprovisionResult {
  /** The term the hosts were admitted under; null when this deployment leads none (every host refused). */
  term: number | null;
  admitted: string[];
  refused: Array<{ identity: string; reason: string }>;
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
export async function reprovision(deps: ReprovisionDeps, identities: readonly string[], options: { force?: boolean } = {}): Promise<ReprovisionResult> {
  const unique = [...new Set(identities)];
  const term = await deps.currentTerm();
  if (term === undefined) return { term: null, admitted: [], refused: unique.map((identity) => ({ identity, reason: deps.notLeading })) };
  const result: ReprovisionResult = { term, admitted: [], refused: [] };
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

/** A message received from a dead-letter queue, still on it until removed. */
export interface DeadLetterMessage {
  messageId: string;
  receiptHandle: string;
  body: string;
  /** String message attributes: `reason`, and for parked hosts `step`, `failures`, `identity`, `term`. */
  attributes: Record<string, string>;
  receiveCount: number;
  /** Epoch ms SQS first received the message (on the original queue for a redriven one). */
  sentAt: number | undefined;
}

export interface DeadLetterQueue {
  readonly url: string;
  /** Receives up to `max` messages, hidden for `hideSeconds`; repeated pages never return one twice. */
  receive(max: number, hideSeconds: number): Promise<DeadLetterMessage[]>;
  /** Makes received messages visible again at once. */
  unhide(messages: readonly DeadLetterMessage[]): Promise<void>;
  remove(message: DeadLetterMessage): Promise<void>;
}

interface OperatorQueues {
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue & DeadLetterQueue;
  lifecycle: MessageQueue;
  lifecycleDlq: MessageQueue;
}

export interface OperatorDeps {
  site: string;
  deploymentId: string;
  lease: Pick<LeaseStore, "read">;
  pause: PauseStore;
  registry: AdmissionRegistry;
  queues: OperatorQueues;
  clock: Clock;
  /** Where the admission flow reports what it could not do; default silent (the CLI prints results). */
  logger?: Logger;
  /**
   * The deployment's `lease.skew_bound` and `rpc_ttl` (default 5 s and 30 s): leadership is judged
   * as the gate judges it (the expiry less the skew bound), and a standby takes over a lease only
   * at its expiry plus both.
   */
  timing?: { skewBoundMs: number; deliveryHorizonMs: number };
  /**
   * The site's registry entries past their `expiresAt` at `now`: no rule looks at them any more and
   * the table's TTL deletes them in its own time (up to days), so status counts them as expired,
   * not as queued or provisioning work.
   */
  expiredEntries?: (now: number) => Promise<Array<{ identity: string; state: string }>>;
  /** Renewal's state; when given, status shows the credentials' expiry and renewal. */
  renewalStore?: RenewalStore;
  /** The deployment's renew settings (the CLI's --config): status then says whether renewal keeps up. */
  renew?: RenewSettings;
}

export const OPERATOR_TIMING_DEFAULTS = { skewBoundMs: 5_000, deliveryHorizonMs: 30_000 } as const;

/** The command cannot run on this deployment now (not the leader, paused); says why. */
export class OperatorRefusal extends ProvisionerError {}

export interface LeaseView extends LeaseDescription {
  /** Ms until the stored expiry on this machine's clock; negative once past. */
  expiresInMs: number | null;
}

export interface OperatorStatus {
  site: string;
  deploymentId: string;
  role: DeploymentRole;
  paused: boolean;
  pause: PauseState | undefined;
  lease: LeaseView;
  queues: Record<QueueName, QueueDepth>;
  /** `byState` counts live entries only; `expired` the entries past their expiry the TTL has not deleted yet. */
  registry: RegistrySummary & { expired: number };
  renewal?: SiteRenewalReport;
}

export interface ElectionView {
  site: string;
  lease: LeaseView;
  deployments: Array<{ deploymentId: string; role: DeploymentRole; paused: boolean; pause?: PauseState }>;
}

export interface DeadLetterView {
  messageId: string;
  identity: string | undefined;
  term: number | undefined;
  /** Why it is there: the reason attribute, else the registry's last error (a receive-limit redrive), else unknown. */
  reason: string;
  step: string | undefined;
  failures: number | undefined;
  receiveCount: number;
  sentAt: number | undefined;
  /** Not host work at all (poison): requeue leaves it. */
  poison: boolean;
}

export interface ReadmitResult {
  term: number;
  requeued: string[];
  skipped: Array<{ identity: string | undefined; messageId?: string; reason: string }>;
}

export interface DeadLetterListing {
  letters: DeadLetterView[];
  /** Letters received by someone else right now (another listing or a requeue): not shown, not gone. */
  inFlight: number;
}

export interface PauseResult extends PauseState {
  /** When a standby may take the lease over if this deployment led: expiry + skew_bound + rpc_ttl; null if it does not hold it. */
  takeoverAt: number | null;
}

/** How long a listing or requeue keeps dead letters hidden from another operator while it works. */
const HIDE_SECONDS = 60;
const DLQ_PAGE_LIMIT = 10_000;

export class Operator {
  private readonly admission: AdmissionFlow;

  constructor(private readonly deps: OperatorDeps) {
    this.admission = new AdmissionFlow({ registry: deps.registry, hostWork: deps.queues.hostWork, logger: deps.logger ?? silentLogger });
  }

  async status(): Promise<OperatorStatus> {
    const now = this.deps.clock.now();
    const [{ lease, role }, pause, queues, summary, expired, renewal] = await Promise.all([
      this.readLease(),
      this.deps.pause.read(this.deps.site, this.deps.deploymentId),
      queueDepths(this.deps.queues),
      this.deps.registry.summary(),
      this.deps.expiredEntries ? this.deps.expiredEntries(now) : Promise.resolve([]),
      this.renewal(),
    ]);
    const byState = { ...summary.byState };
    for (const entry of expired) {
      const state = entry.state as keyof typeof byState;
      if (Object.hasOwn(byState, state)) byState[state] = Math.max(0, byState[state] - 1);
    }
    const registry = { ...summary, byState, expired: expired.length };
    return {
      site: this.deps.site,
      deploymentId: this.deps.deploymentId,
      role: role(this.deps.deploymentId),
      paused: pause?.paused === true,
      pause,
      lease,
      queues,
      registry,
      ...(renewal ? { renewal } : {}),
    };
  }

  /** The lease and every deployment known to the site: the holder, switches, and this one. */
  async electionView(): Promise<ElectionView> {
    const [{ lease, role }, switches] = await Promise.all([this.readLease(), this.deps.pause.list(this.deps.site)]);
    const ids = new Set([this.deps.deploymentId, ...switches.map((state) => state.deploymentId)]);
    if (lease.leader) ids.add(lease.leader);
    return {
      site: this.deps.site,
      lease,
      deployments: [...ids].sort().map((deploymentId) => {
        const pause = switches.find((state) => state.deploymentId === deploymentId);
        return {
          deploymentId,
          role: role(deploymentId),
          paused: pause?.paused === true,
          ...(pause ? { pause } : {}),
        };
      }),
    };
  }

  /**
   * Every dead letter this listing could receive (SQS has no peek: each receive raises the letter's
   * receive count by one, so the count is not shown as a figure of the host's failures), and how
   * many others are in flight, hidden by another listing or requeue at this moment.
   */
  async listDeadLetters(): Promise<DeadLetterListing> {
    const messages = await this.receiveAll();
    try {
      const [errors, depth] = await Promise.all([this.lastErrors(), this.deps.queues.hostWorkDlq.counts()]);
      return { letters: messages.map((message) => this.view(message, errors)), inFlight: Math.max(0, depth.inFlight - messages.length) };
    } finally {
      await this.deps.queues.hostWorkDlq.unhide(messages);
    }
  }

  /**
   * Admits the dead-lettered hosts (all, or those named) again under the current term, queues the
   * fresh work and removes their dead letters. Poison and hosts being provisioned stay where they are.
   */
  async requeueDeadLetters(selection: { identities?: readonly string[] }): Promise<ReadmitResult> {
    const term = await this.currentTerm();
    const messages = await this.receiveAll();
    const wanted = selection.identities ? new Set(selection.identities) : undefined;
    const result: ReadmitResult = { term, requeued: [], skipped: [] };
    const untouched: DeadLetterMessage[] = [];
    // One admission per host, however many of its dead letters there are; the extra ones go too.
    const byIdentity = new Map<string, DeadLetterMessage[]>();
    for (const message of messages) {
      let work: HostWork;
      try {
        work = decodeHostWork(message.body);
      } catch (error) {
        untouched.push(message);
        if (!wanted) result.skipped.push({ identity: undefined, messageId: message.messageId, reason: `poison, left in the DLQ: ${messageOf(error)}` });
        continue;
      }
      if (wanted && !wanted.has(work.identity)) {
        untouched.push(message);
        continue;
      }
      byIdentity.set(work.identity, [...(byIdentity.get(work.identity) ?? []), message]);
    }
    try {
      // One host at a time, its letters removed as soon as its work is queued: a requeue stopped
      // midway leaves at most one host both queued and still dead-lettered, never the whole batch.
      for (const [identity, letters] of byIdentity) {
        const [outcome] = await this.admission.readmit([identity], term);
        if (!outcome?.queued) {
          untouched.push(...letters);
          result.skipped.push({ identity, reason: outcome?.reason ?? "not admitted" });
          continue;
        }
        for (const letter of letters) await this.deps.queues.hostWorkDlq.remove(letter);
        result.requeued.push(identity);
      }
      for (const identity of wanted ?? []) {
        if (!byIdentity.has(identity)) result.skipped.push({ identity, reason: "no dead letter for this host" });
      }
    } finally {
      await this.deps.queues.hostWorkDlq.unhide(untouched);
    }
    return result;
  }

  /** `reprovision` (above) under the term this deployment leads with; OperatorRefusal when it does not lead. */
  async reprovision(identities: readonly string[], options: { force?: boolean } = {}): Promise<ReprovisionResult> {
    const term = await this.currentTerm();
    return reprovision(
      {
        currentTerm: async () => term,
        // Never given: currentTerm above refused already when this deployment does not lead.
        notLeading: `deployment ${this.deps.deploymentId} does not lead site "${this.deps.site}"`,
        admission: this.admission,
        registry: this.deps.registry,
        forceHint: "--force",
        logger: this.deps.logger ?? silentLogger,
      },
      identities,
      options,
    );
  }

  /**
   * Writes the pause switch. Unless `force`, only for a deployment the site knows (the lease holder
   * or one with a switch already): a mistyped id would pause nothing while the real leader goes on.
   */
  async setPaused(paused: boolean, note: { by?: string; reason?: string; force?: boolean } = {}): Promise<PauseResult> {
    const [item, switches] = await Promise.all([this.deps.lease.read(this.deps.site), this.deps.pause.list(this.deps.site)]);
    const known = new Set(switches.map((state) => state.deploymentId));
    if (item?.holder) known.add(item.holder);
    if (!note.force && !known.has(this.deps.deploymentId)) {
      const list = known.size > 0 ? `known: ${[...known].sort().join(", ")}` : "it knows none yet";
      throw new OperatorRefusal(
        `site "${this.deps.site}" knows no deployment ${this.deps.deploymentId} (${list}): check --deployment, or pass --force to write its switch anyway`,
      );
    }
    const now = this.deps.clock.now();
    const timing = this.deps.timing ?? OPERATOR_TIMING_DEFAULTS;
    const holds = item?.holder === this.deps.deploymentId && item.released !== true && item.expiresAt > now;
    const state: PauseState = {
      site: this.deps.site,
      deploymentId: this.deps.deploymentId,
      paused,
      changedAt: this.deps.clock.now(),
      ...(note.by ? { by: note.by } : {}),
      ...(note.reason ? { reason: note.reason } : {}),
    };
    await this.deps.pause.write(state);
    if (!holds || !item) return { ...state, takeoverAt: null };
    // A standby waits the larger of its own bounds and the item's (lib/lease/lease.ts, claimableBefore):
    // the item's horizon is the term's, longer while a container with a longer rpc_ttl still sends.
    const skewMs = Math.max(timing.skewBoundMs, item.skewBoundMs ?? 0);
    const horizonMs = Math.max(timing.deliveryHorizonMs, item.deliveryHorizonMs ?? 0);
    return { ...state, takeoverAt: item.expiresAt + skewMs + horizonMs };
  }

  private async renewal(): Promise<SiteRenewalReport | undefined> {
    const store = this.deps.renewalStore;
    if (!store) return undefined;
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), store.read(this.deps.site)]);
    return siteRenewalReport(hosts, stored.state, this.deps.site, this.deps.clock.now(), this.deps.renew);
  }

  /** The stored lease as lib/lease describes it, and who leads by it now. */
  private async readLease(): Promise<{
    lease: LeaseView;
    role: (deploymentId: string) => DeploymentRole;
    leads: (deploymentId: string) => boolean;
    leadsWithSkew: (deploymentId: string) => boolean;
  }> {
    const now = this.deps.clock.now();
    const item = await this.deps.lease.read(this.deps.site);
    const lease = describeLease(item, this.deps.deploymentId, now);
    return {
      lease: { ...lease, expiresInMs: lease.expiresAt === null ? null : lease.expiresAt - now },
      role: (deploymentId) => roleOf(item, deploymentId, now),
      leads: (deploymentId) => leadsAt(item, deploymentId, now),
      // What the pause gate counts as valid: work admitted under a term this close to its expiry
      // may reach a queue that a new leader's term already makes stale.
      leadsWithSkew: (deploymentId) => leadsAt(item, deploymentId, now, this.skewBoundMs()),
    };
  }

  private skewBoundMs(): number {
    return (this.deps.timing ?? OPERATOR_TIMING_DEFAULTS).skewBoundMs;
  }

  /** The term this deployment leads with; OperatorRefusal on a standby, or a paused or released deployment. */
  async currentTerm(): Promise<number> {
    const [{ lease, leads, leadsWithSkew }, pause] = await Promise.all([this.readLease(), this.deps.pause.read(this.deps.site, this.deps.deploymentId)]);
    if (pause?.paused) throw new OperatorRefusal(`deployment ${this.deps.deploymentId} is paused: resume it first, or run this on the leader's stack`);
    if (lease.heldByThisDeployment && !leadsWithSkew(this.deps.deploymentId)) {
      throw new OperatorRefusal(
        `deployment ${this.deps.deploymentId} holds term ${lease.term} of site "${this.deps.site}" for less than the skew bound ` +
          `(${(this.skewBoundMs() / 1000).toFixed(0)} s): another machine may already count it expired; run this again after its next renewal`,
      );
    }
    if (!lease.heldByThisDeployment || lease.term === null) {
      const holder = lease.leader && leads(lease.leader) ? `${lease.leader} holds term ${lease.term}` : "no deployment holds the lease";
      throw new OperatorRefusal(
        `deployment ${this.deps.deploymentId} does not lead site "${this.deps.site}" (${holder}); its queue would drop the work: run this against the leader's stack`,
      );
    }
    return lease.term;
  }

  private async receiveAll(): Promise<DeadLetterMessage[]> {
    const messages: DeadLetterMessage[] = [];
    const seen = new Set<string>();
    while (messages.length < DLQ_PAGE_LIMIT) {
      const page = (await this.deps.queues.hostWorkDlq.receive(10, HIDE_SECONDS)).filter((message) => !seen.has(message.messageId));
      if (page.length === 0) break;
      for (const message of page) {
        seen.add(message.messageId);
        messages.push(message);
      }
    }
    return messages;
  }

  private async lastErrors(): Promise<Map<string, string>> {
    const summary = await this.deps.registry.summary();
    return new Map(summary.lastErrors.map((entry) => [entry.identity, entry.lastError]));
  }

  private view(message: DeadLetterMessage, errors: Map<string, string>): DeadLetterView {
    let work: HostWork | undefined;
    let problem: string | undefined;
    try {
      work = decodeHostWork(message.body);
    } catch (error) {
      problem = messageOf(error);
    }
    const identity = work?.identity ?? message.attributes.identity;
    const failures = message.attributes.failures === undefined ? undefined : Number(message.attributes.failures);
    return {
      messageId: message.messageId,
      identity,
      term: work?.term,
      reason:
        message.attributes.reason ??
        (identity && errors.get(identity) ? `retried until the receive limit; last error ${errors.get(identity)}` : undefined) ??
        problem ??
        "retried until the receive limit (no error recorded)",
      step: message.attributes.step,
      failures: Number.isFinite(failures) ? failures : undefined,
      receiveCount: message.receiveCount,
      sentAt: message.sentAt,
      poison: work === undefined,
    };
  }
}

/** An operator's request names at most this many hosts, so it stays a small part of renewal's one state item. */
const MAX_NAMED_HOSTS = 5_000;

export interface RenewRequestOptions {
  selection: RenewSelection;
  ratePerMinute?: number;
  dryRun: boolean;
  by?: string;
}

export interface RenewRequestResult {
  term: number;
  dryRun: boolean;
  /** The hosts that will be (or, on a dry run, would be) sent reprovision, in that order. */
  hosts: Array<{ identity: string; expiresAt: number; kind: HostExpiry["credentials"]["kind"] }>;
  skipped: Array<{ identity: string; reason: string }>;
  ratePerMinute?: number;
  /** A request that was still being carried out and is replaced by this one. */
  replaced?: number;
  /** On a dry run: why the request itself would be refused, as nothing would carry it out. */
  wouldBeRefused?: string;
}

export interface RenewalOperatorDeps {
  site: string;
  operator: Pick<Operator, "currentTerm">;
  registry: Pick<AdmissionRegistry, "expiries">;
  store: RenewalStore;
  clock: Clock;
}

export class RenewalOperator {
  constructor(private readonly deps: RenewalOperatorDeps) {}

  async report(): Promise<RenewalReport> {
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), this.deps.store.read(this.deps.site)]);
    return renewalReport(hosts, stored.state, this.deps.site, this.deps.clock.now());
  }

  /**
   * Chooses the hosts now (soonest expiry first) and, unless a dry run, hands them to the leader's
   * next renew run. Refused when no leader's renew run was seen lately: nothing would send them.
   */
  async request(options: RenewRequestOptions): Promise<RenewRequestResult> {
    const { selection } = options;
    if ("identities" in selection && selection.identities.length > MAX_NAMED_HOSTS) {
      throw new OperatorRefusal(`renew names ${selection.identities.length} hosts; name at most ${MAX_NAMED_HOSTS}, or use --all or --due-within, which work for any number`);
    }
    const term = await this.deps.operator.currentTerm();
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), this.deps.store.read(this.deps.site)]);
    const now = this.deps.clock.now();
    const missing = renewRunsMissing(stored.state, this.deps.site, now);
    if (missing && !options.dryRun) throw new OperatorRefusal(`nothing would send the hosts reprovision: ${missing}`);
    const provisioned = hosts.filter((host) => host.state === "provisioned" && host.credentials.expiresAt > now);
    const byIdentity = new Map(provisioned.map((host) => [host.identity, host]));
    const skipped: RenewRequestResult["skipped"] = [];
    let chosen: HostExpiry[];
    if ("identities" in selection) {
      chosen = [];
      for (const identity of new Set(selection.identities)) {
        const host = byIdentity.get(identity);
        if (host) chosen.push(host);
        else skipped.push({ identity, reason: "not a provisioned host with a known credential expiry that has not expired" });
      }
    } else if ("dueWithinMs" in selection) {
      chosen = provisioned.filter((host) => host.credentials.expiresAt <= now + selection.dueWithinMs);
    } else chosen = provisioned;
    chosen.sort((a, b) => a.credentials.expiresAt - b.credentials.expiresAt);
    const result: RenewRequestResult = {
      term,
      dryRun: options.dryRun,
      hosts: chosen.map((host) => ({ identity: host.identity, expiresAt: host.credentials.expiresAt, kind: host.credentials.kind })),
      skipped,
      ...(options.ratePerMinute === undefined ? {} : { ratePerMinute: options.ratePerMinute }),
      ...(missing ? { wouldBeRefused: `nothing would send the hosts reprovision: ${missing}` } : {}),
    };
    if (options.dryRun || chosen.length === 0) return result;

    const { result: replaced } = await updateRenewalState(this.deps.store, this.deps.site, (state) => {
      if (state.paused) {
        throw new OperatorRefusal(`renewal of site "${this.deps.site}" paused itself (${state.paused.reason}): see why, then run renew --resume`);
      }
      const previous = state.request && requestedHosts(hosts, state, state.request, now).remaining;
      state.request = {
        term,
        requestedAt: now,
        // What to renew, not a list of the fleet: the request fits one item whatever the fleet's size.
        selection: "identities" in selection ? { identities: chosen.map((host) => host.identity) } : selection,
        ...(options.by ? { by: options.by } : {}),
        ...(options.ratePerMinute === undefined ? {} : { ratePerMinute: options.ratePerMinute }),
      };
      return previous;
    });
    return replaced === undefined ? result : { ...result, replaced };
  }

  /** Ends a pause renewal put itself in, and forgets the failures that caused it. */
  async resume(): Promise<{ resumed: boolean; reason?: string }> {
    const { result } = await updateRenewalState(this.deps.store, this.deps.site, (state) => {
      const paused = state.paused;
      delete state.paused;
      state.recent = [];
      return paused;
    });
    return result ? { resumed: true, reason: result.reason } : { resumed: false };
  }
}
