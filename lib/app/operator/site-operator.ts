/**
 * The `choria-provisioner` CLI's commands (cli/) on one deployment of a site, over the same ports as
 * the functions: its status, the election, the host-work dead letters and requeueing them
 * (./dead-letters.ts), the pause switch, the quarantine (docs/audit.md), and `reprovision` (the function's use case, ./functions.ts).
 * A command that admits work runs only under the term this deployment leads with now
 * (Operator.currentTerm); elsewhere it is refused (OperatorRefusal), saying where to run it.
 */
import type { AdmissionRegistry } from "../../admission/registry";
import type { QuarantinedHost } from "../../admission/quarantine";
import { assertValidIdentity } from "../../choria/identity";
import { leadsAt } from "../../lease/stored-lease";
import type { LeaseStore } from "../../ports/lease-store";
import type { PauseState, PauseStore } from "../../ports/pause-store";
import { silentLogger, type Logger } from "../../ports/logger";
import type { Clock } from "../../ports/clock";
import { AdmissionFlow } from "../admission-flow";
import type { MessageQueue, RenewalStore } from "../use-case-ports";
import { DeadLetters, type DeadLetterListing, type DeadLetterRequeue } from "./dead-letters";
import { type DeadLetterQueue } from "../use-case-ports";
import { reprovision } from "./functions";
import {
  leaseView,
  OperatorRefusal,
  readDeploymentStatus,
  roleOf,
  type DeploymentRole,
  type DeploymentStatus,
  type LeaseView,
  type ReadmitResult,
  type RenewSettings,
  type StatusSources,
} from "./report";

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
  /** The site's registry entries past their `expiresAt` at `now`, counted apart by status (StatusSources). */
  expiredEntries?: StatusSources["expiredEntries"];
  /** Renewal's state; when given, status shows the credentials' expiry and renewal. */
  renewalStore?: RenewalStore;
  /** The deployment's renew settings (the CLI's --config): status then says whether renewal keeps up. */
  renew?: RenewSettings;
}

export const OPERATOR_TIMING_DEFAULTS = { skewBoundMs: 5_000, deliveryHorizonMs: 30_000 } as const;

export interface ElectionView {
  site: string;
  lease: LeaseView;
  deployments: Array<{ deploymentId: string; role: DeploymentRole; paused: boolean; pause?: PauseState }>;
}

export interface PauseResult extends PauseState {
  /** When a standby may take the lease over if this deployment led: expiry + skew_bound + rpc_ttl; null if it does not hold it. */
  takeoverAt: number | null;
}

export class Operator {
  private readonly admission: AdmissionFlow;
  private readonly deadLetters: DeadLetters;

  constructor(private readonly deps: OperatorDeps) {
    this.admission = new AdmissionFlow({ registry: deps.registry, hostWork: deps.queues.hostWork, logger: deps.logger ?? silentLogger });
    this.deadLetters = new DeadLetters({ queue: deps.queues.hostWorkDlq, registry: deps.registry, admission: this.admission });
  }

  async status(): Promise<DeploymentStatus> {
    return readDeploymentStatus({
      site: this.deps.site,
      deploymentId: this.deps.deploymentId,
      leaseStore: this.deps.lease,
      pauseStore: this.deps.pause,
      registry: this.deps.registry,
      queues: this.deps.queues,
      clock: this.deps.clock,
      ...(this.deps.expiredEntries ? { expiredEntries: this.deps.expiredEntries } : {}),
      ...(this.deps.renewalStore ? { renewalStore: this.deps.renewalStore } : {}),
      ...(this.deps.renew ? { renew: this.deps.renew } : {}),
    });
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

  /** The host-work dead letters, and how many others are in flight (DeadLetters.list). */
  async listDeadLetters(): Promise<DeadLetterListing> {
    return this.deadLetters.list();
  }

  /**
   * Admits the dead-lettered hosts (all, or those named) again under the current term, queues the
   * fresh work and removes their dead letters. Poison and hosts being provisioned stay where they are.
   */
  async requeueDeadLetters(selection: { identities?: readonly string[] }): Promise<DeadLetterRequeue> {
    return this.deadLetters.requeue(await this.currentTerm(), selection);
  }

  /** The site's quarantined hosts with the evidence of each (docs/audit.md), the latest first. */
  async listQuarantine(): Promise<QuarantinedHost[]> {
    return this.deps.registry.quarantined();
  }

  /**
   * Releases a quarantined host: admissible at once on every deployment of the site, so the next
   * discovery or startup event provisions the survivor, or quarantines it again if two machines
   * still answer. Needs no term: it admits nothing itself.
   */
  async releaseQuarantine(identity: string): Promise<{ identity: string; released: boolean }> {
    assertValidIdentity(identity, "identity");
    return { identity, released: await this.deps.registry.releaseQuarantine(identity) };
  }

  /** The reprovision function's use case under the term this deployment leads with; OperatorRefusal when it does not lead. */
  async reprovision(identities: readonly string[], options: { force?: boolean } = {}): Promise<ReadmitResult> {
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

  /** The stored lease as lib/lease describes it, and who leads by it now. */
  private async readLease(): Promise<{
    lease: LeaseView;
    role: (deploymentId: string) => DeploymentRole;
    leads: (deploymentId: string) => boolean;
    leadsWithSkew: (deploymentId: string) => boolean;
  }> {
    const now = this.deps.clock.now();
    const item = await this.deps.lease.read(this.deps.site);
    return {
      lease: leaseView(item, this.deps.deploymentId, now),
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
}
