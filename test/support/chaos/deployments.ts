/**
 * Deployments of the provisioner for the leadership chaos tests, built as production builds them:
 * each deployment has its own NATS connection and DynamoDB client, and they share what every
 * deployment of a site shares: the lease table (DynamoDB Local) and the site's one admission
 * registry (a store the scenario hands every deployment). Both use the production provisioner
 * identity (one sender and caller id per site). Each deployment runs its keeper as production does
 * (keeper.ts: one `keepLease` run a minute, arming the ticks that keep the lease between its runs)
 * and, while it leads, a discover-admit-provision loop, as the discover / provision functions do;
 * the engine, gate and RPC client are the production ones.
 *
 * Paths: every deployment reaches the broker and DynamoDB through its own loopback proxy, so a test
 * can stall one deployment's paths (TCP open, no bytes) and heal them later.
 *
 * Time: every clock (deployments and the fleet) runs SCALE times faster than real time, so the
 * nodes judge TTLs on the same timeline; a deployment may carry a wall-clock skew. The lease
 * (30 s / 10 s / 5 s, delivery horizon = the 30 s request TTL) and the discovery interval keep
 * their production values on those clocks. RPC waits are the planned attempt timeouts divided by
 * SCALE, so what the gate counts on (an attempt is over within its timeout) holds in real time.
 *
 * Observation is at the node: the simulator records, per request, when the node received it and
 * when it ran it. The wire carries no term (real nodes must see the production protocol), so the
 * RPC client's publish hook maps each request id to the term of the work it was published for;
 * node records are joined on that id. What the node ran is the fact; the term is what the sender
 * claimed at the moment it let the request go.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { connect, type NatsConnection } from "nats";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { AdmissionStore } from "../../../lib/ports/admission-store";
import { BroadcastDiscoverer } from "../../../lib/nats/discovery";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { engineSettings } from "../engine-settings";
import { ProvisionEngine } from "../../../lib/engine/provision";
import type { ProvisionOutcome } from "../../../lib/engine/outcome";
import { ProvisionerError } from "../../../lib/errors";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseGate } from "../../../lib/ports/lease-gate";
import type { AnnounceRequest, ConditionalWrite, ExtendRequest, LeaseStore, PeerRequest, ReleaseRequest, ClaimRequest } from "../../../lib/ports/lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { LOCAL_AWS } from "../../../dev/local/services";
import type { ChoriaRpc, RpcCall, RpcReply } from "../../../lib/ports/rpc";
import type { Clock } from "../../../lib/ports/clock";
import type { HostWork } from "../../../lib/ports/host-work";
import type { Fleet } from "../../../dev/simulator";
import { noMetrics } from "../fakes";
import { hostAndPort, startStallProxy, type StallProxy } from "../stall-proxy";
import { ChaosKeeper } from "./keeper";
import { CALLER_ID, CountingHelper, SENDER_ID, TOKEN } from "./support";

export const SCALE = 10;
/** The request TTL the deployments send (the v1 minimum) and so the lease's delivery horizon. */
const RPC_TTL_SECONDS = 30;
export const LEASE = { leaseDurationMs: 30_000, keepIntervalMs: 10_000, skewBoundMs: 5_000, deliveryHorizonMs: RPC_TTL_SECONDS * 1_000 } as const;
const INTERVAL_MS = 60_000;
/** The leaseKeeper function's schedule (EventBridge, every minute). */
export const KEEPER_RATE_MS = 60_000;

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

/** A request as its sender let it go: the id the node records, and the term it was sent for. */
export interface Published {
  deployment: string;
  requestId: string;
  identity: string;
  action: string;
  term: number;
}

/** A request as the node ran it, with the term its sender published it under. */
export interface NodeExecution extends Published {
  receivedAt: number;
  executedAt: number;
}

/** A lease write a container's lease got an answer to (applied, or refused with the stored item). */
export interface LeaseWrite {
  container: string;
  /** The expiry and delivery horizon the container asked for. */
  requested: { expiresAt: number; deliveryHorizonMs: number };
  result: ConditionalWrite;
}

export interface TermBegin {
  deployment: string;
  term: number;
  /** The claimant's wall clock when it sent the claim. */
  wallAt: number;
}

/** What every deployment of one test reports into: publishes by request id, term starts, outcomes. */
export class Observatory {
  readonly published = new Map<string, Published>();
  readonly terms: TermBegin[] = [];
  readonly leaseWrites: LeaseWrite[] = [];
  readonly outcomes: Array<{ deployment: string; outcome: ProvisionOutcome }> = [];
  private readonly watches: Array<{ match: (published: Published) => boolean; then: (published: Published) => void }> = [];

  /** Records a request its sender is letting go (called synchronously right before `nc.publish`). */
  publish(published: Published): void {
    this.published.set(published.requestId, published);
    for (const watch of this.watches.filter((candidate) => candidate.match(published))) {
      this.watches.splice(this.watches.indexOf(watch), 1);
      watch.then(published);
    }
  }

  /**
   * Runs `then` once, synchronously, for the first request let go that matches: a fault injected
   * there (a path stalled) catches that request's bytes on their way out of the process.
   */
  whenPublished(match: (published: Published) => boolean, then: (published: Published) => void): void {
    this.watches.push({ match, then });
  }

  /** Every request a node ran (not dropped), joined with the term it was published under, in node order. */
  executions(fleet: Fleet): { attributed: NodeExecution[]; unattributed: number } {
    const attributed: NodeExecution[] = [];
    let unattributed = 0;
    for (const entry of fleet.record) {
      if (entry.outcome === "dropped" || entry.agent === "discovery") continue;
      const published = this.published.get(entry.requestId);
      if (!published) {
        unattributed++;
        continue;
      }
      attributed.push({ ...published, receivedAt: entry.timeMs, executedAt: entry.executedAtMs ?? entry.timeMs });
    }
    return { attributed, unattributed };
  }

  /**
   * Executions at a node that ran after that node had received a request of a later term: the
   * fencing violation, counted where it lands. Also catches overlapping attempts of two terms.
   */
  crossTermExecutions(fleet: Fleet): NodeExecution[] {
    const { attributed } = this.executions(fleet);
    const firstOfTerm = new Map<string, Map<number, number>>();
    for (const execution of attributed) {
      const perNode = firstOfTerm.get(execution.identity) ?? new Map<number, number>();
      perNode.set(execution.term, Math.min(perNode.get(execution.term) ?? Number.POSITIVE_INFINITY, execution.receivedAt));
      firstOfTerm.set(execution.identity, perNode);
    }
    return attributed.filter((execution) => {
      for (const [term, receivedAt] of firstOfTerm.get(execution.identity) ?? []) {
        if (term > execution.term && receivedAt <= execution.executedAt) return true;
      }
      return false;
    });
  }
}

class KilledError extends ProvisionerError {}

/** A store fault injected before a write is sent (a blip) or after it applied (an ambiguous write). */
class InjectedStoreFault extends ProvisionerError {}

/** Wraps the lease store to observe term starts and, on demand, hold writes back or inject faults. */
class ObservedLeaseStore implements LeaseStore {
  writeDelayMs = 0;
  /** Probability that a write fails before it is sent. */
  blipRate = 0;
  /** Probability that a write applies and its response is lost. */
  ambiguousRate = 0;
  faults = 0;

  constructor(
    private readonly inner: LeaseStore,
    private readonly container: string,
    private readonly deployment: string,
    private readonly observatory: Observatory,
    private readonly random: () => number,
  ) {}

  async claim(request: ClaimRequest): Promise<ConditionalWrite> {
    const result = await this.write(request, () => this.inner.claim(request));
    return result;
  }

  extend(request: ExtendRequest): Promise<ConditionalWrite> {
    return this.write(request, () => this.inner.extend(request));
  }

  release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.inner.release(request);
  }

  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.inner.markAnnounced(request);
  }

  recordPeer(request: PeerRequest): Promise<void> {
    return this.inner.recordPeer(request);
  }

  read(site: string) {
    return this.inner.read(site);
  }

  private async write(requested: ClaimRequest | ExtendRequest, send: () => Promise<ConditionalWrite>): Promise<ConditionalWrite> {
    if (this.writeDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.writeDelayMs));
    if (this.random() < this.blipRate) {
      this.faults++;
      throw new InjectedStoreFault("injected: the write failed before it was sent");
    }
    const result = await send();
    this.observatory.leaseWrites.push({
      container: this.container,
      requested: { expiresAt: requested.expiresAt, deliveryHorizonMs: requested.deliveryHorizonMs },
      result,
    });
    if (result.applied && result.item.holder === this.deployment) {
      const last = this.observatory.terms.at(-1);
      if (!last || last.term < result.item.term) {
        this.observatory.terms.push({ deployment: this.deployment, term: result.item.term, wallAt: result.item.expiresAt - LEASE.leaseDurationMs });
      }
    }
    if (this.random() < this.ambiguousRate) {
      this.faults++;
      throw new InjectedStoreFault("injected: the write applied and its response was lost");
    }
    return result;
  }
}

export interface DeploymentOptions {
  /** This process (a container); also the deployment's id unless `deploymentId` is given. */
  name: string;
  /** The lease holder id: containers of one deployment (a rollout's old and new code) share it. */
  deploymentId?: string;
  site: string;
  tableName: string;
  /** The site's admission registry, the same store for every deployment of the site. */
  admissionStore: AdmissionStore;
  natsUrl: string;
  dynamoEndpoint: string;
  fleet: Fleet;
  observatory: Observatory;
  skewMs?: number;
  /** Hosts provisioned at once. */
  workers?: number;
  /** Lease settings for this deployment (the beyond-the-bound demonstration turns the horizon off). */
  lease?: Partial<typeof LEASE>;
  /** Request TTL this deployment sends. */
  rpcTtlSeconds?: number;
  random?: () => number;
}

export class ChaosDeployment {
  readonly name: string;
  readonly deploymentId: string;
  readonly clock: Clock;
  readonly helper = new CountingHelper();
  gate!: LeaseGate;
  private store!: ObservedLeaseStore;
  private registry!: AdmissionRegistry;
  private engine!: ProvisionEngine;
  private discoverer!: BroadcastDiscoverer;
  private nc!: NatsConnection;
  private dynamo!: DynamoDBClient;
  private brokerPath!: StallProxy;
  private storePath!: StallProxy;
  private keeper!: ChaosKeeper;
  private readonly current = new AsyncLocalStorage<HostWork>();
  private leading: Promise<void> | undefined;
  private killed = false;
  private stopping = false;

  private constructor(private readonly options: DeploymentOptions) {
    this.name = options.name;
    this.deploymentId = options.deploymentId ?? options.name;
    this.clock = scaledClock(options.skewMs ?? 0);
  }

  static async create(options: DeploymentOptions): Promise<ChaosDeployment> {
    const deployment = new ChaosDeployment(options);
    await deployment.build();
    return deployment;
  }

  private async build(): Promise<void> {
    const { options } = this;
    this.brokerPath = await startStallProxy(hostAndPort(options.natsUrl));
    this.storePath = await startStallProxy(hostAndPort(options.dynamoEndpoint));
    // The production lease client: short request timeout that throws, two attempts.
    this.dynamo = new DynamoDBClient({
      ...LOCAL_AWS,
      endpoint: `http://${this.storePath.address}`,
      maxAttempts: 2,
      requestHandler: { requestTimeout: 500, connectionTimeout: 1_000, throwOnRequestTimeout: true },
    });
    this.nc = await connect({ servers: `nats://${this.brokerPath.address}`, name: options.name, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    const random = options.random ?? Math.random;
    const { deploymentId } = this;
    const leaseStore = new DynamoDbLeaseStore({ client: this.dynamo, tableName: options.tableName });
    this.store = new ObservedLeaseStore(leaseStore, options.name, deploymentId, options.observatory, random);
    const settings = resolveLeaseSettings({ leaderElection: true, site: options.site, deploymentId, ...LEASE, ...options.lease, roundTimeoutMs: 1_500 });
    // onWon on the gate, not the keeper: a term announced by an engine's gate read must start leading too.
    this.gate = createLeaseGate(settings, {
      store: this.store,
      metrics: noMetrics,
      clock: this.clock,
      onWon: (term) => {
        this.leading = this.lead(term);
      },
    });
    const keepIntervalMs = options.lease?.keepIntervalMs ?? LEASE.keepIntervalMs;
    // Each deployment's schedule fires at its own phase in the minute, as EventBridge's do.
    const phaseMs = Math.floor(random() * KEEPER_RATE_MS);
    this.keeper = new ChaosKeeper({ gate: this.gate, clock: this.clock, keepIntervalMs, keeperRateMs: KEEPER_RATE_MS, phaseMs, scale: SCALE });
    // The site's one registry, as every stack of the site names the site's admission table.
    this.registry = new AdmissionRegistry({ site: options.site, intervalMs: INTERVAL_MS }, { store: options.admissionStore, metrics: noMetrics, clock: this.clock });
    const client = {
      senderId: SENDER_ID,
      callerId: CALLER_ID,
      protocolVersion: 1 as const,
      signer: { version: 1 as const, kind: "insecure" as const },
      clock: this.clock,
      ttl: options.rpcTtlSeconds ?? RPC_TTL_SECONDS,
    };
    this.discoverer = new BroadcastDiscoverer(this.nc, { ...client, discoveryTimeoutMs: 1_000, idleMs: 150 });
    const rpc = new NatsChoriaRpc(this.nc, {
      ...client,
      onPublish: ({ requestId, identity, action }) => {
        const work = this.current.getStore();
        options.observatory.publish({ deployment: this.name, requestId, identity, action, term: work?.term ?? -1 });
      },
    });
    const tagged: ChoriaRpc = { call: (call) => this.send(rpc, call) };
    this.engine = new ProvisionEngine({
      settings: engineSettings(TOKEN, {
        features: { jwt: true },
        upgradesRepository: "",
        intervalMs: INTERVAL_MS,
        jwtVerifier: { kind: "ed25519", publicKey: options.fleet.signer.publicKey },
      }),
      rpc: tagged,
      gate: this.gate,
      helper: this.helper,
      metrics: noMetrics,
      clock: this.clock,
      random: () => 0.5,
    });
  }

  /** Starts the keeper's schedule; leading starts whenever a round (the keeper's or a tick's) wins a term's announcement. */
  start(): void {
    this.keeper.start();
  }

  /** Keeper runs and ticks this deployment has run so far. */
  get rounds(): { keeperRuns: number; ticksRun: number } {
    return { keeperRuns: this.keeper.keeperRuns, ticksRun: this.keeper.ticksRun };
  }

  /** From now on every lease write of this deployment takes `ms` of real time before it is sent. */
  delayStoreWrites(ms: number): void {
    this.store.writeDelayMs = ms;
  }

  /** Lease writes fail before sending (`blipRate`) or apply and lose their response (`ambiguousRate`). */
  injectStoreFaults(rates: { blipRate?: number; ambiguousRate?: number }): void {
    this.store.blipRate = rates.blipRate ?? 0;
    this.store.ambiguousRate = rates.ambiguousRate ?? 0;
  }

  get storeFaults(): number {
    return this.store.faults;
  }

  /** Stalls this deployment's paths to the broker and to DynamoDB: connections stay open, no bytes move. */
  stallPaths(): void {
    this.brokerPath.freeze();
    this.storePath.freeze();
  }

  /** Lets the held bytes through (whatever was in flight arrives late) and moves bytes again. */
  healPaths(): void {
    this.brokerPath.thaw();
    this.storePath.thaw();
  }

  /** The process is gone: nothing more is sent, no more rounds run. */
  kill(): void {
    this.killed = true;
    void this.keeper.stop();
  }

  /** Graceful stop: no new work, in-flight hosts finish, then the lease is given up. */
  async stopAndRelease(): Promise<boolean> {
    this.stopping = true;
    await this.keeper.stop();
    await this.leading;
    return this.gate.release();
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    this.healPaths();
    await this.keeper.stop();
    await this.leading;
    await this.nc.close().catch(() => undefined);
    this.dynamo.destroy();
    await this.brokerPath.close();
    await this.storePath.close();
  }

  private async send(rpc: ChoriaRpc, call: RpcCall): Promise<RpcReply> {
    if (this.killed) throw new KilledError(`deployment ${this.name} is dead`);
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
