/**
 * Deployments of the provisioner for the leadership chaos tests, built from the real parts: a lease
 * gate on DynamoDB Local (one table, one site, as a global table), an admission registry shared by
 * all deployments, broadcast discovery and the engine over a real nats-server, against the fleet
 * simulator. Each deployment runs its lease keeper and, while it leads, a discover-admit-provision
 * loop, as the discover / provision functions do.
 *
 * Time: every deployment's clock runs SCALE times faster than real time (wall and monotonic), and
 * each may carry a wall-clock skew. The lease (30 s / 10 s / 5 s) and the discovery interval (1 min)
 * keep their production values on those clocks, so a failover takes seconds of real time. RPC
 * waits are capped at the planned attempt timeout divided by SCALE, which keeps what the gate
 * counts on (an attempt is over within its timeout) true in real time too.
 *
 * Observation: every Choria RPC a deployment sends is recorded with the term and admission it was
 * sent for, and every lease claim with the real time its request left (the earliest instant the
 * new term could have begun). `duplicateSends` counts RPCs a deployment sent after another
 * deployment's newer term began.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { NatsConnection } from "nats";
import { MemoryAdmissionStore } from "../../../lib/admission/memory-admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { BroadcastDiscoverer } from "../../../lib/choria/discovery";
import { NatsChoriaRpc } from "../../../lib/choria/rpc-client";
import { DEFAULT_CERT_DENY_LIST } from "../../../lib/crypto";
import { ProvisionEngine, type ProvisionOutcome } from "../../../lib/engine";
import { ProvisionerError } from "../../../lib/errors";
import { createLeaseGate, type LeaseGate } from "../../../lib/lease/gate";
import { runLeaseKeeper } from "../../../lib/lease/keeper";
import type { AnnounceRequest, ClaimRequest, ConditionalWrite, ExtendRequest, LeaseStore, ReleaseRequest } from "../../../lib/lease/lease";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import type { ChoriaRpc, Clock, HostWork, Metrics, RpcCall, RpcReply } from "../../../lib/ports";
import type { Fleet } from "../../../lib/simulator";
import { CALLER_ID, CountingHelper, SENDER_ID, TOKEN } from "./support";

export const SCALE = 10;
export const LEASE = { leaseDurationMs: 30_000, renewIntervalMs: 10_000, skewBoundMs: 5_000 } as const;
export const INTERVAL_MS = 60_000;

const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

/** One epoch for every scaled clock of the process, so clocks made at different times agree. */
const EPOCH = { real: performance.now(), wall: Date.now() };

/** A clock running SCALE times faster than real time, with `skewMs` added to its wall clock. */
export function scaledClock(skewMs = 0): Clock {
  const elapsed = () => (performance.now() - EPOCH.real) * SCALE;
  const wallStart = EPOCH.wall;
  return {
    // Whole milliseconds, as Date.now(): admission times travel in queue messages as integers.
    now: () => Math.floor(wallStart + elapsed() + skewMs),
    monotonic: () => elapsed(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms) / SCALE)),
  };
}

export interface SentRpc {
  deployment: string;
  identity: string;
  action: string;
  term: number;
  admittedAt: number;
  /** Real time (performance.now) the attempt was handed to NATS. */
  at: number;
}

export interface TermBegin {
  deployment: string;
  term: number;
  /** Real time the winning claim request was sent. */
  at: number;
  /** The claimant's wall clock when it sent the claim. */
  wallAt: number;
}

/** What every deployment of one test shares: the observations and the registry's table. */
export class Observatory {
  readonly sends: SentRpc[] = [];
  readonly terms: TermBegin[] = [];
  /** Every applied renewal: the expiry a holder counted on. */
  readonly renewals: Array<{ deployment: string; expiresAt: number }> = [];
  readonly outcomes: Array<{ deployment: string; outcome: ProvisionOutcome }> = [];
  readonly admissions = new MemoryAdmissionStore();

  /** RPCs sent under a term after another deployment's newer term had begun. */
  duplicateSends(): SentRpc[] {
    return this.sends.filter((send) => this.terms.some((begin) => begin.term > send.term && begin.deployment !== send.deployment && begin.at < send.at));
  }

  /** Successful configure requests per admission (identity, term, admittedAt), as the nodes recorded them. */
  configuresPerAdmission(fleet: Fleet): Map<string, number> {
    const counts = new Map<string, number>();
    for (const send of this.sends.filter((entry) => entry.action === "configure")) {
      const key = `${send.identity}@${send.term}/${send.admittedAt}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    // A configure the node never answered OK did not configure it; count only those it recorded.
    const okPerIdentity = new Map<string, number>();
    for (const entry of fleet.record) if (entry.action === "configure" && entry.outcome === 0) okPerIdentity.set(entry.identity, (okPerIdentity.get(entry.identity) ?? 0) + 1);
    for (const key of counts.keys()) if (!okPerIdentity.has(key.split("@")[0]!)) counts.delete(key);
    return counts;
  }
}

class KilledError extends ProvisionerError {}

/** Wraps the lease store to observe term starts and, on demand, hold this deployment's writes back. */
class ObservedLeaseStore implements LeaseStore {
  writeDelayMs = 0;

  constructor(
    private readonly inner: LeaseStore,
    private readonly deployment: string,
    private readonly observatory: Observatory,
  ) {}

  async claim(request: ClaimRequest): Promise<ConditionalWrite> {
    const at = performance.now();
    await this.delay();
    const result = await this.inner.claim(request);
    if (result.applied) {
      this.observatory.terms.push({ deployment: this.deployment, term: result.item.term, at, wallAt: request.expiredBefore + LEASE.skewBoundMs });
      this.observatory.renewals.push({ deployment: this.deployment, expiresAt: result.item.expiresAt });
    }
    return result;
  }

  async extend(request: ExtendRequest): Promise<ConditionalWrite> {
    await this.delay();
    const result = await this.inner.extend(request);
    if (result.applied) this.observatory.renewals.push({ deployment: this.deployment, expiresAt: result.item.expiresAt });
    return result;
  }

  release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.inner.release(request);
  }

  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.inner.markAnnounced(request);
  }

  read(site: string) {
    return this.inner.read(site);
  }

  private async delay(): Promise<void> {
    if (this.writeDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.writeDelayMs));
  }
}

export interface DeploymentOptions {
  name: string;
  site: string;
  store: LeaseStore;
  nc: NatsConnection;
  fleet: Fleet;
  observatory: Observatory;
  skewMs?: number;
  /** Hosts provisioned at once. */
  workers?: number;
}

export class ChaosDeployment {
  readonly name: string;
  readonly clock: Clock;
  readonly gate: LeaseGate;
  readonly helper = new CountingHelper();
  private readonly store: ObservedLeaseStore;
  private readonly registry: AdmissionRegistry;
  private readonly engine: ProvisionEngine;
  private readonly discoverer: BroadcastDiscoverer;
  private readonly keeperStop = new AbortController();
  private readonly current = new AsyncLocalStorage<HostWork>();
  private keeper: Promise<unknown> | undefined;
  private leading: Promise<void> | undefined;
  private killed = false;
  private stopping = false;

  constructor(private readonly options: DeploymentOptions) {
    this.name = options.name;
    this.clock = scaledClock(options.skewMs ?? 0);
    this.store = new ObservedLeaseStore(options.store, options.name, options.observatory);
    const settings = resolveLeaseSettings({ leaderElection: true, site: options.site, deploymentId: options.name, ...LEASE });
    // onWon on the gate, not the keeper: a term re-won by an engine's gate read must start leading too.
    this.gate = createLeaseGate(settings, {
      store: this.store,
      metrics: noMetrics,
      clock: this.clock,
      onWon: (term) => {
        this.leading = this.lead(term);
      },
    });
    this.registry = new AdmissionRegistry({ site: options.site, intervalMs: INTERVAL_MS }, { store: options.observatory.admissions, metrics: noMetrics, clock: this.clock });
    const client = { senderId: SENDER_ID, callerId: CALLER_ID, protocolVersion: 1 as const, signer: { version: 1 as const, kind: "insecure" as const } };
    this.discoverer = new BroadcastDiscoverer(options.nc, { ...client, discoveryTimeoutMs: 1_000, idleMs: 150 });
    const rpc = new NatsChoriaRpc(options.nc, client);
    const tagged: ChoriaRpc = { call: (call) => this.send(rpc, call) };
    this.engine = new ProvisionEngine({
      settings: {
        features: { jwt: true, ed25519: false, pki: false, upgrades: false },
        token: TOKEN,
        certDenyList: DEFAULT_CERT_DENY_LIST,
        serverJwtValidityMs: 365 * 24 * 3600 * 1000,
        upgradesRepository: "",
        upgradesOptional: false,
        intervalMs: INTERVAL_MS,
        jwtVerifier: { kind: "ed25519", publicKey: options.fleet.signer.publicKey },
      },
      rpc: tagged,
      gate: this.gate,
      helper: this.helper,
      metrics: noMetrics,
      clock: this.clock,
      random: () => 0.5,
    });
  }

  /** Starts the lease keeper; leading starts whenever it wins a term. */
  start(): void {
    this.keeper = runLeaseKeeper({
      lease: this.gate,
      clock: this.clock,
      until: Number.MAX_SAFE_INTEGER,
      intervalMs: LEASE.renewIntervalMs,
      signal: this.keeperStop.signal,
    });
  }

  /** From now on every store write of this deployment takes `ms` of real time before it is sent. */
  delayStoreWrites(ms: number): void {
    this.store.writeDelayMs = ms;
  }

  /** The process is gone: nothing more is sent, no more rounds run. */
  kill(): void {
    this.killed = true;
    this.keeperStop.abort();
  }

  /** Graceful stop: no new work, in-flight hosts finish, then the lease is given up. */
  async stopAndRelease(): Promise<boolean> {
    this.stopping = true;
    this.keeperStop.abort();
    await this.keeper;
    await this.leading;
    return this.gate.release();
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    this.keeperStop.abort();
    await this.keeper;
    await this.leading;
  }

  private async send(rpc: ChoriaRpc, call: RpcCall): Promise<RpcReply> {
    if (this.killed) throw new KilledError(`deployment ${this.name} is dead`);
    const work = this.current.getStore();
    this.options.observatory.sends.push({
      deployment: this.name,
      identity: call.identity,
      action: call.action,
      term: work?.term ?? -1,
      admittedAt: work?.admittedAt ?? -1,
      at: performance.now(),
    });
    return rpc.call({ ...call, timeoutMs: Math.ceil(call.timeoutMs / SCALE) });
  }

  private active(): boolean {
    return !this.killed && !this.stopping;
  }

  /** The discover function's loop while this deployment holds `term`. */
  private async lead(term: number): Promise<void> {
    await this.leading;
    while (this.active() && (await this.gate.currentTerm()) === term) {
      const started = this.clock.monotonic();
      // As the discover function does: a failed discovery (broker away) finds nothing this round.
      const identities = await this.discoverer.discover().catch(() => [] as string[]);
      const admitted: HostWork[] = [];
      for (const identity of identities) {
        if (!this.active()) break;
        const work = await this.registry.admit(identity, "discovery", term);
        if (work) admitted.push(work);
      }
      await this.provisionAll(admitted);
      const waitMs = INTERVAL_MS / 6 - (this.clock.monotonic() - started);
      if (waitMs > 0 && this.active()) await this.clock.sleep(waitMs);
    }
  }

  private async provisionAll(queue: HostWork[]): Promise<void> {
    const workers = Array.from({ length: this.options.workers ?? 8 }, async () => {
      for (let work = queue.shift(); work && this.active(); work = queue.shift()) await this.provisionOne(work);
    });
    await Promise.all(workers);
  }

  private async provisionOne(work: HostWork): Promise<void> {
    const term = await this.gate.currentTerm();
    if (term === undefined) return;
    const begun = await this.registry.begin(work, term);
    if (begun.status !== "claimed") return;
    const outcome = await this.current.run(work, () => this.engine.provision(work));
    this.options.observatory.outcomes.push({ deployment: this.name, outcome });
    if (this.killed) return;
    await this.registry.complete(begun.claim, outcome.kind === "provisioned" ? "provisioned" : "failed");
  }
}

/** Hosts still in provisioning mode: admitted work that never ended with a configured node. */
export function unprovisioned(fleet: Fleet): string[] {
  return fleet.identities.filter((identity) => fleet.node(identity).provisioned === 0);
}
