/**
 * The operator's use cases behind `choria-provisioner` (lib/operator/cli.ts is the adapter): the
 * deployment's status, the election, the host-work dead letters and requeueing them, the pause
 * switch and re-provisioning. They take ports only: the lease and pause stores, the admission
 * registry, the queues and a clock.
 *
 * Work is only ever (re)admitted under the lease term this deployment holds right now. A dead
 * letter still carries the term it was first admitted under; sent back as it is (a console
 * redrive), the provisioner would discard it as stale. Requeueing admits the host afresh instead.
 */
import type { AdmissionRegistry, RegistrySummary } from "../admission/registry";
import { AdmissionFlow } from "../app/admission-flow";
import { decodeHostWork } from "../app/host-work-message";
import { queueDepths, type QueueDepth, type QueueName } from "../app/operator";
import type { MessageQueue } from "../app/ports";
import { renewalReport, type RenewalReport, type RenewalStore } from "../app/renewal-state";
import { messageOf, ProvisionerError } from "../errors";
import { describeLease, leadsAt, type LeaseDescription, type LeaseStore } from "../lease/lease";
import type { PauseState, PauseStore } from "../lease/pause";
import { silentLogger, type Clock, type HostWork, type Logger } from "../ports";

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

export interface OperatorQueues {
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
  /** Renewal's state; when given, status shows the credentials' expiry and renewal. */
  renewalStore?: RenewalStore;
}

/** The command cannot run on this deployment now (not the leader, paused); says why. */
export class OperatorRefusal extends ProvisionerError {}

export interface LeaseView extends LeaseDescription {
  /** Ms until the stored expiry on this machine's clock; negative once past. */
  expiresInMs: number | null;
}

export type { QueueName };

export interface OperatorStatus {
  site: string;
  deploymentId: string;
  paused: boolean;
  pause: PauseState | undefined;
  lease: LeaseView;
  queues: Record<QueueName, QueueDepth>;
  registry: RegistrySummary;
  renewal?: RenewalReport;
}

export interface ElectionView {
  site: string;
  lease: LeaseView;
  deployments: Array<{ deploymentId: string; role: "leader" | "standby"; paused: boolean; pause?: PauseState }>;
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

/** How long a listing or requeue keeps dead letters hidden from another operator while it works. */
const HIDE_SECONDS = 60;
const DLQ_PAGE_LIMIT = 10_000;

export class Operator {
  private readonly admission: AdmissionFlow;

  constructor(private readonly deps: OperatorDeps) {
    this.admission = new AdmissionFlow({ registry: deps.registry, hostWork: deps.queues.hostWork, logger: deps.logger ?? silentLogger });
  }

  async status(): Promise<OperatorStatus> {
    const [lease, pause, queues, registry, renewal] = await Promise.all([
      this.leaseView(),
      this.deps.pause.read(this.deps.site, this.deps.deploymentId),
      queueDepths(this.deps.queues),
      this.deps.registry.summary(),
      this.renewal(),
    ]);
    return {
      site: this.deps.site,
      deploymentId: this.deps.deploymentId,
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
    const [{ lease, leads }, switches] = await Promise.all([this.readLease(), this.deps.pause.list(this.deps.site)]);
    const ids = new Set([this.deps.deploymentId, ...switches.map((state) => state.deploymentId)]);
    if (lease.leader) ids.add(lease.leader);
    return {
      site: this.deps.site,
      lease,
      deployments: [...ids].sort().map((deploymentId) => {
        const pause = switches.find((state) => state.deploymentId === deploymentId);
        return {
          deploymentId,
          role: leads(deploymentId) ? ("leader" as const) : ("standby" as const),
          paused: pause?.paused === true,
          ...(pause ? { pause } : {}),
        };
      }),
    };
  }

  async listDeadLetters(): Promise<DeadLetterView[]> {
    const messages = await this.receiveAll();
    try {
      const errors = await this.lastErrors();
      return messages.map((message) => this.view(message, errors));
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
      for (const outcome of await this.admission.readmit([...byIdentity.keys()], term)) {
        const letters = byIdentity.get(outcome.identity) ?? [];
        if (!outcome.queued) {
          untouched.push(...letters);
          result.skipped.push({ identity: outcome.identity, reason: outcome.reason });
          continue;
        }
        for (const letter of letters) await this.deps.queues.hostWorkDlq.remove(letter);
        result.requeued.push(outcome.identity);
      }
      for (const identity of wanted ?? []) {
        if (!byIdentity.has(identity)) result.skipped.push({ identity, reason: "no dead letter for this host" });
      }
    } finally {
      await this.deps.queues.hostWorkDlq.unhide(untouched);
    }
    return result;
  }

  /** Admits the hosts again under the current term at once, whatever they did before, unless one is being provisioned. */
  async reprovision(identities: readonly string[]): Promise<ReadmitResult> {
    const term = await this.currentTerm();
    const result: ReadmitResult = { term, requeued: [], skipped: [] };
    for (const outcome of await this.admission.readmit(identities, term)) {
      if (outcome.queued) result.requeued.push(outcome.identity);
      else result.skipped.push({ identity: outcome.identity, reason: outcome.reason });
    }
    return result;
  }

  async setPaused(paused: boolean, note: { by?: string; reason?: string } = {}): Promise<PauseState> {
    const state: PauseState = {
      site: this.deps.site,
      deploymentId: this.deps.deploymentId,
      paused,
      changedAt: this.deps.clock.now(),
      ...(note.by ? { by: note.by } : {}),
      ...(note.reason ? { reason: note.reason } : {}),
    };
    await this.deps.pause.write(state);
    return state;
  }

  private async renewal(): Promise<RenewalReport | undefined> {
    const store = this.deps.renewalStore;
    if (!store) return undefined;
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), store.read(this.deps.site)]);
    return renewalReport(hosts, stored.state, this.deps.clock.now());
  }

  private async leaseView(): Promise<LeaseView> {
    return (await this.readLease()).lease;
  }

  /** The stored lease as lib/lease describes it, and who leads by it now. */
  private async readLease(): Promise<{ lease: LeaseView; leads: (deploymentId: string) => boolean }> {
    const now = this.deps.clock.now();
    const item = await this.deps.lease.read(this.deps.site);
    const lease = describeLease(item, this.deps.deploymentId, now);
    return {
      lease: { ...lease, expiresInMs: lease.expiresAt === null ? null : lease.expiresAt - now },
      leads: (deploymentId) => leadsAt(item, deploymentId, now),
    };
  }

  /** The term this deployment holds now; refuses when it is not the leader or is paused. */
  /** The term this deployment leads with; OperatorRefusal on a standby, or a paused or released deployment. */
  async currentTerm(): Promise<number> {
    const [{ lease, leads }, pause] = await Promise.all([this.readLease(), this.deps.pause.read(this.deps.site, this.deps.deploymentId)]);
    if (pause?.paused) throw new OperatorRefusal(`deployment ${this.deps.deploymentId} is paused: resume it first, or run this on the leader's stack`);
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
