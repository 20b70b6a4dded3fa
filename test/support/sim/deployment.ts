/**
 * One deployment (one stack) of the site in the simulation, composed from the production use
 * cases: the lease gate, the admission registry and flow, leadership (keeper and discovery), host
 * work, lifecycle events and their bridge, ticks, and renewal. Each Lambda function runs in its own
 * container (its own gate and in-process lease state); a crashed container is replaced at the
 * function's next invocation, as Lambda does. Scheduled functions run every minute; the queue
 * functions are invoked by an event source that polls when a message may be visible.
 *
 * The keeper runs one lease round a minute and arms its ticks as delayed messages on the
 * deployment's lifecycle queue (lib/app/ticks.ts); the lifecycle function runs each batch's ticks
 * (a lease round, then the startup events waiting in the site's stream, admitted in-process), its
 * discovery continuations (lib/app/discovery-continuation.ts) and any queued event. Ticks are lost, duplicated and late as the faults say.
 *
 * What every deployment of a site shares comes in `site`: the lease table (lease and pause
 * switches), the admission registry, renewal's state and the issuance ledger. A deployment's queues
 * are its own.
 */
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { AdmissionStore } from "../../../lib/ports/admission-store";
import { AdmissionFlow } from "../../../lib/app/admission-flow";
import { HostWorkProcessor } from "../../../lib/app/host-work";
import { Leadership } from "../../../lib/app/leadership";
import { LifecycleBridge, LifecycleEvents } from "../../../lib/app/lifecycle-events";
import { LifecycleQueue } from "../../../lib/app/lifecycle-queue";
import { TickArming, Ticks } from "../../../lib/app/ticks";
import { Renewal, unansweredHoldFor } from "../../../lib/app/renewal";
import type { RenewalStore, Broker, InvocationContext, LifecycleEventSource, MessageQueue, QueueMessage } from "../../../lib/app/use-case-ports";
import { ProvisionEngine } from "../../../lib/engine/provision";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseGate, PauseGate } from "../../../lib/ports/lease-gate";
import type { IssuanceLedger } from "../../../lib/ports/issuance-ledger";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import type { PauseStore } from "../../../lib/ports/pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { PausedError } from "../../../lib/errors";
import { silentLogger } from "../../../lib/ports/logger";
import type { HelperRunner } from "../../../lib/ports/helper";
import type { HostWork } from "../../../lib/ports/host-work";
import { engineSettings } from "../engine-settings";
import { noMetrics } from "../fakes";
import { helperResponseWith } from "../helper-response";
import { certificateValidUntil } from "./certificate";
import { overNetwork, SimFault, type Faults, type Paths } from "./faults";
import { LIFECYCLE_COMPONENT, type SimFleet } from "./fleet";
import { SimQueue } from "./queue";
import { Container, type VirtualTime } from "./time";

export const SITE = "sim";
const LEDGER_RETENTION_MS = 400 * 86_400_000;
export const TOKEN = "sim-provisioning-token";
export const LEASE_TIMING = { leaseDurationMs: 30_000, keepIntervalMs: 10_000, skewBoundMs: 5_000 } as const;
/** How long the helper's certificates are valid, and so the renewal window (half of it). */
export const CREDENTIAL_LIFETIME_MS = 60 * 60_000;
const HOST_FAILURE_LIMIT = 5;
/** The keeper's schedule: it arms the ticks of this much time ahead. */
const KEEPER_RATE_MS = 60_000;
/** Deliveries of one stream event before the bridge's last chance (lib/nats/lifecycle-event-source.ts). */
const STREAM_MAX_DELIVERIES = 5;
/** The durable consumer's ack wait, and the delay an event handed back waits. */
const STREAM_ACK_WAIT_MS = 30_000;
const STREAM_RETRY_DELAY_MS = 5_000;

/** What every deployment of the site shares (or, under the per-deployment-registry variant, the registry and renewal's state not). */
export interface SiteStores {
  lease: LeaseStore;
  pause: PauseStore;
  admission: AdmissionStore;
  renewal: RenewalStore;
  /** The site's issuance ledger (in production, in the site's admission table). */
  ledger: IssuanceLedger;
}

/** Known-bad variants of the pipeline the simulation must catch (see variants.ts). */
export interface Variant {
  gateNotRead?: boolean;
  termNotCompared?: boolean;
  horizonIgnored?: boolean;
  pauseIgnored?: boolean;
}

export interface DeploymentSpec {
  id: string;
  wallSkewMs: number;
  rpcTtlSeconds: number;
  workers: number;
  /** The discovery `interval`: how often a host may be admitted, and how old queued work may get. */
  intervalMs: number;
}

export type FunctionName = "keeper" | "discover" | "provision" | "lifecycle" | "renew" | "release";

/** One container's lease gate, the gate its engine reads, the lease table's stores it reaches them through, and whom a won term is announced to. */
interface Leasing {
  container: Container;
  gate: LeaseGate;
  engineGate: PauseGate;
  leaseStore: LeaseStore;
  pauseStore: PauseStore;
  announce: { to?: Pick<Leadership, "onWonTerm"> };
}

/** What one container runs: every use case, over its own gate and network paths. */
interface Stack {
  container: Container;
  gate: LeaseGate;
  leadership: Leadership;
  hostWork: HostWorkProcessor;
  lifecycleQueue: LifecycleQueue;
  renewal: Renewal;
}

export interface SimWorld {
  time: VirtualTime;
  faults: Faults;
  fleet: SimFleet;
  variant: Variant;
}

export class SimDeployment {
  readonly paths: Paths = { storeHeldUntil: 0, brokerCutUntil: 0 };
  readonly hostWork: SimQueue;
  readonly hostWorkDlq: SimQueue;
  readonly lifecycleQueue: SimQueue;
  readonly lifecycleDlq: SimQueue;
  /** The bodies of the startup events its ticks handed to admission and admission took. */
  readonly eventsTaken: string[] = [];
  private readonly containers = new Map<FunctionName, Stack>();
  private readonly busy = new Set<FunctionName>();
  private readonly polls = new Map<FunctionName, number>();
  private readonly armed = new Map<FunctionName, Array<(container: Container) => void>>();
  private generation = 0;

  constructor(
    readonly spec: DeploymentSpec,
    private readonly world: SimWorld,
    private readonly site: SiteStores,
  ) {
    const { time, faults } = world;
    const url = (name: string) => `sim://${spec.id}/${name}`;
    this.hostWorkDlq = new SimQueue(url("host-work-dlq"), time, faults, { visibilityTimeoutMs: 30_000 });
    this.hostWork = new SimQueue(url("host-work"), time, faults, { visibilityTimeoutMs: 330_000, maxReceiveCount: 10, deadLetters: this.hostWorkDlq });
    this.lifecycleDlq = new SimQueue(url("lifecycle-dlq"), time, faults, { visibilityTimeoutMs: 30_000 });
    this.lifecycleQueue = new SimQueue(url("lifecycle"), time, faults, { visibilityTimeoutMs: 185_000, maxReceiveCount: 5, deadLetters: this.lifecycleDlq });
    this.hostWork.watch((at) => this.pollAt("provision", at));
    this.lifecycleQueue.watch((at) => this.pollAt("lifecycle", at));
  }

  /** Schedules the minute functions from `startAt` to `endAt` (true ms), each at its own phase. */
  schedule(startAt: number, endAt: number): void {
    const { time, faults } = this.world;
    const minute = (fn: FunctionName, timeoutMs: number, run: (stack: Stack, ctx: InvocationContext) => Promise<unknown>) => {
      const phase = faults.between(0, 59_000);
      for (let at = startAt + phase; at < endAt; at += 60_000) time.at(at, () => this.invoke(fn, timeoutMs, run));
    };
    minute("keeper", 30_000, (stack, ctx) => stack.leadership.keepLease(ctx));
    minute("discover", 55_000, (stack, ctx) => stack.leadership.discover(ctx));
    minute("renew", 120_000, async (stack, ctx) => {
      const result = await stack.renewal.run(ctx);
      if (process.env.SIM_DEBUG) console.log(this.spec.id, this.world.time.now, JSON.stringify(result));
    });
  }

  /** The registry this deployment writes (the site's, unless the variant gives each deployment its own). */
  get admissionStore(): AdmissionStore {
    return this.site.admission;
  }

  get renewalStore(): RenewalStore {
    return this.site.renewal;
  }

  /** The running container of `fn`, if any: what a crash or a freeze strikes. */
  container(fn: FunctionName): Container | undefined {
    return this.containers.get(fn)?.container;
  }

  get functions(): FunctionName[] {
    return [...this.containers.keys()];
  }

  /**
   * Runs `strike` on the container of `fn` a moment into its next invocation (at once if one is
   * running): a fault aimed at work in flight, not at an idle container.
   */
  whenBusy(fn: FunctionName, strike: (container: Container) => void): void {
    const running = this.busy.has(fn) ? this.containers.get(fn)?.container : undefined;
    if (running) strike(running);
    else this.armed.set(fn, [...(this.armed.get(fn) ?? []), strike]);
  }

  /** The operator's `release` function: a fresh container gives the deployment's term up. */
  async release(): Promise<boolean> {
    const stack = this.stack("release");
    this.containers.delete("release");
    return stack.gate.release();
  }

  private pollAt(fn: "provision" | "lifecycle", at: number): void {
    const due = Math.max(at, this.world.time.now) + 200;
    const scheduled = this.polls.get(fn);
    if (scheduled !== undefined && scheduled <= due && scheduled >= this.world.time.now) return;
    this.polls.set(fn, due);
    this.world.time.at(due, () => {
      if (this.polls.get(fn) === due) this.polls.delete(fn);
      this.poll(fn);
    });
  }

  private poll(fn: "provision" | "lifecycle"): void {
    if (this.busy.has(fn)) return;
    const queue = fn === "provision" ? this.hostWork : this.lifecycleQueue;
    const messages = queue.receive(10);
    if (messages.length === 0) return;
    const timeoutMs = fn === "provision" ? 300_000 : 30_000;
    this.invoke(fn, timeoutMs, async (stack, ctx) => {
      const result = fn === "provision" ? await stack.hostWork.handle(messages, ctx) : await stack.lifecycleQueue.handle(messages, ctx);
      const failed = new Set(result.failedMessageIds);
      for (const message of messages) if (!failed.has(message.id)) queue.remove(message.id);
    });
  }

  private invoke(fn: FunctionName, timeoutMs: number, run: (stack: Stack, ctx: InvocationContext) => Promise<unknown>): void {
    if (this.busy.has(fn)) return;
    const { time } = this.world;
    const stack = this.stack(fn);
    const deadline = time.now + timeoutMs;
    const ctx: InvocationContext = { remainingMs: () => deadline - time.now };
    this.busy.add(fn);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.busy.delete(fn);
      if (fn === "provision" || fn === "lifecycle") this.pollAt(fn, time.now);
    };
    // Lambda ends an invocation at its timeout, whatever it was doing: the container is gone.
    time.at(deadline, () => {
      if (done) return;
      stack.container.crash();
      finish();
    });
    stack.gate.beginInvocation();
    // A strike armed in the fault phase lands only in it: the quiet phase is for everything to settle
    // (found by seed 1398387626, scenario 624: a crash armed at 4 minutes struck at 64).
    for (const strike of this.armed.get(fn) ?? []) {
      time.after(this.world.faults.between(0, 3_000), () => {
        if (this.world.faults.active) strike(stack.container);
      });
    }
    this.armed.delete(fn);
    run(stack, ctx).then(finish, (error: unknown) => {
      if (!(error instanceof SimFault)) throw error;
      finish();
    });
  }

  private stack(fn: FunctionName): Stack {
    const existing = this.containers.get(fn);
    if (existing && !existing.container.dead) return existing;
    const stack = this.compose(`${this.spec.id}/${fn}#${++this.generation}`);
    this.containers.set(fn, stack);
    return stack;
  }

  private compose(name: string): Stack {
    const { time, faults, fleet } = this.world;
    const container = new Container(name, time, this.spec.wallSkewMs, faults.between(0, 1_000_000));
    const net = <T extends object>(store: T) => overNetwork(store, container, time, faults, this.paths);
    const parts = this.leasing(container, net(this.site.lease), net(this.site.pause));
    const registry = new AdmissionRegistry(
      { site: SITE, intervalMs: this.spec.intervalMs },
      { store: net(this.site.admission), metrics: noMetrics, clock: container.clock, newClaimToken: () => `claim-${faults.random().toString(36).slice(2)}` },
    );
    const admission = new AdmissionFlow({ registry, hostWork: this.hostWork, logger: silentLogger, clock: container.clock, resendUnknown: { pauseMs: 1_000, withinMs: 4_000 } });
    const broker = fleet.broker(container, this.spec.id, this.paths);
    const leadership = new Leadership({
      settings: { leaderElection: true, identity: "provisioner.sim", discoveryMaxNodes: 1_000, discoveryNewNamesPerInterval: 1_000, discoveryIntervalMs: this.spec.intervalMs, discoveryBacklogMs: 0, allowShortIdentities: false, deadlineMarginMs: 1_000 },
      ...{ gate: parts.gate, ticks: this.arming(container), broker, admission, registry, hostWork: this.hostWork, continuations: this.lifecycleQueue, clock: container.clock, logger: silentLogger, metrics: noMetrics, random: faults.random },
    });
    parts.announce.to = leadership;
    const lifecycle = new LifecycleEvents({ component: LIFECYCLE_COMPONENT, gate: parts.gate, admission, registry, skewBoundMs: LEASE_TIMING.skewBoundMs, allowShortIdentities: false, lifecycleDlq: this.lifecycleDlq, logger: silentLogger, metrics: noMetrics });
    const ticks = new Ticks({ gate: parts.gate, bridge: this.bridgeOf(parts, lifecycle), arming: this.arming(container), keepIntervalMs: LEASE_TIMING.keepIntervalMs, clock: container.clock, logger: silentLogger });
    return {
      container,
      gate: parts.gate,
      leadership,
      hostWork: this.hostWorkOf(parts, registry, broker),
      lifecycleQueue: new LifecycleQueue({ events: lifecycle, ticks, leadership, logger: silentLogger }),
      renewal: this.renewalOf(parts, registry, net(this.site.renewal)),
    };
  }

  /** The container's lease gate (the pause switch read unless the variant ignores it), and the one the engine reads. */
  private leasing(container: Container, leaseStore: LeaseStore, pauseStore: PauseStore): Leasing {
    const { variant } = this.world;
    const settings = resolveLeaseSettings({
      leaderElection: true,
      site: SITE,
      deploymentId: this.spec.id,
      ...LEASE_TIMING,
      deliveryHorizonMs: variant.horizonIgnored ? 0 : this.spec.rpcTtlSeconds * 1_000,
    });
    const announce: Leasing["announce"] = {};
    const gate = createLeaseGate(settings, {
      store: leaseStore,
      ...(variant.pauseIgnored ? {} : { pause: pauseStore }),
      metrics: noMetrics,
      clock: container.clock,
      onWon: (term, remainingMs) => announce.to?.onWonTerm(term, remainingMs),
    });
    return { container, gate, engineGate: this.engineGate(gate, container), leaseStore, pauseStore, announce };
  }

  private hostWorkOf(parts: Leasing, registry: AdmissionRegistry, broker: Pick<Broker, "prepareRpc">): HostWorkProcessor {
    const { fleet, faults } = this.world;
    const { container, gate, engineGate } = parts;
    const clock = container.clock;
    // One engine per work item, so the nodes' records carry the term each request was sent under:
    // the term of the work being provisioned (the engine keeps nothing between items but a gauge).
    const engineFor = (term: number) => {
      const rpc = fleet.rpc(container, this.spec.id, "provisioning", this.spec.rpcTtlSeconds, this.paths, () => term);
      return new ProvisionEngine({ settings: engineSettings(TOKEN, { intervalMs: this.spec.intervalMs }), rpc, gate: engineGate, helper: this.helper(container), metrics: noMetrics, clock, random: faults.random });
    };
    return new HostWorkProcessor({
      settings: { deploymentId: this.spec.id, workers: this.spec.workers, retry: { baseDelaySeconds: 10, maxDelaySeconds: 120 }, failureLimit: HOST_FAILURE_LIMIT, deadlineMarginMs: 5_000, site: SITE, ledgerRetentionMs: LEDGER_RETENTION_MS },
      gate,
      registry: this.termBlind(registry),
      ledger: this.site.ledger,
      engine: { provision: (work, options) => engineFor(work.term).provision(work, options) },
      broker,
      hostWork: this.hostWork,
      hostWorkDlq: this.hostWorkDlq,
      logger: silentLogger,
      metrics: noMetrics,
      clock,
    });
  }

  /** The container's tick arming: the ticks go to the lifecycle queue, some lost or late on the way. */
  private arming(container: Container): TickArming {
    return new TickArming({
      queue: this.tickPath(),
      timing: { keepIntervalMs: LEASE_TIMING.keepIntervalMs, armAheadMs: KEEPER_RATE_MS },
      clock: container.clock,
      logger: silentLogger,
    });
  }

  /**
   * The lifecycle queue as the ticks reach the function: SQS takes each one (it may duplicate it,
   * queue.ts), but the tick may then be lost, or reach the function seconds late.
   */
  private tickPath(): Pick<MessageQueue, "sendAll"> {
    const { faults } = this.world;
    return {
      sendAll: async (messages) => {
        const delivered = messages.flatMap((message) => {
          if (faults.strikes("tick-lost", faults.rates.tickLost ?? 0)) return [];
          const late = faults.strikes("tick-late", faults.rates.tickLate ?? 0) ? faults.between(1, 25) : 0;
          return [{ ...message, delaySeconds: (message.delaySeconds ?? 0) + late }];
        });
        const accepted = await this.lifecycleQueue.sendAll(delivered);
        // A lost tick was taken by SQS all the same: the sender cannot tell.
        return messages.map((_, index) => accepted[index] ?? true);
      },
    };
  }

  /** The bridge a tick runs, recording what it hands to admission and admission takes. */
  private bridgeOf(parts: Leasing, lifecycle: LifecycleEvents): LifecycleBridge {
    const events = {
      handle: async (messages: readonly QueueMessage[]) => {
        const result = await lifecycle.handle(messages);
        const failed = new Set(result.failedMessageIds);
        for (const message of messages) if (!failed.has(message.id)) this.eventsTaken.push(message.body);
        return result;
      },
    };
    // The gate carries the pause switch (or, in the pause-ignored variant, none).
    return new LifecycleBridge({
      gate: parts.gate,
      source: this.eventSource(parts.container),
      events,
      lifecycleDlq: this.lifecycleDlq,
      logger: silentLogger,
      metrics: noMetrics,
    });
  }

  private renewalOf(parts: Leasing, registry: AdmissionRegistry, store: RenewalStore): Renewal {
    const { container, gate, engineGate } = parts;
    // A run sends under one term, the one its gate reads opened for: what the nodes' records carry.
    let renewalTerm = -1;
    const renewalGate = {
      standing: () => gate.standing(),
      assertOpen: async (term: number, ms: number) => {
        const window = await engineGate.assertOpen(term, ms);
        renewalTerm = term;
        return window;
      },
    };
    return new Renewal({
      settings: {
        ...{ site: SITE, enabled: true, before: { fraction: 0.5 }, ratePerMinute: 100, maxInFlight: 50, timeoutMs: 5 * 60_000 },
        ...{ unansweredHoldMs: unansweredHoldFor(this.spec.intervalMs), failureThreshold: 1_000, failureWindow: 1_000, token: TOKEN, deadlineMarginMs: 5_000 },
      },
      gate: renewalGate,
      registry,
      store,
      rpc: this.world.fleet.rpc(container, this.spec.id, "main", this.spec.rpcTtlSeconds, this.paths, () => renewalTerm),
      prepareRpc: async () => undefined,
      clock: container.clock,
      logger: silentLogger,
      metrics: noMetrics,
    });
  }

  /**
   * The gate the engine and renewal read before each attempt. The gate-not-read variant opens
   * without reading it; the term-not-compared variant opens for whatever term this deployment holds.
   */
  private engineGate(gate: LeaseGate, container: Container): PauseGate {
    const { variant } = this.world;
    if (variant.gateNotRead) return { assertOpen: async (term, ms) => ({ term, stampedAt: container.clock.now(), endsBy: container.clock.monotonic() + ms }) };
    if (!variant.termNotCompared) return gate;
    return {
      assertOpen: async (term, ms) => {
        const held = await gate.currentTerm();
        if (held === undefined) throw new PausedError("simulated variant: this deployment holds no term");
        return { ...(await gate.assertOpen(held, ms)), term };
      },
    };
  }

  /** Under the term-not-compared variant, work of any term is claimed as if its term were current. */
  private termBlind(registry: AdmissionRegistry): AdmissionRegistry {
    if (!this.world.variant.termNotCompared) return registry;
    return new Proxy(registry, {
      get: (target, property, receiver) =>
        property === "begin" ? (work: HostWork) => target.begin(work, work.term) : Reflect.get(target, property, receiver),
    });
  }

  private helper(container: Container): HelperRunner {
    const { time, faults } = this.world;
    return {
      run: (request) =>
        container.send(async () => {
          const late = faults.strikes("helper-late", faults.rates.helperLate);
          await time.sleep(late ? faults.between(9_000, 15_000) : faults.between(20, 400));
          if (faults.strikes("helper-failure", faults.rates.helperFailure)) throw new SimFault(`simulated: the helper failed for ${request.identity}`);
          const now = container.clock.now();
          if (faults.strikes("helper-defer", faults.rates.helperDefer)) return helperResponseWith({ defer: true, msg: "simulated: not ready for this host yet" });
          return helperResponseWith({
            configuration: { "plugin.choria.server.provision": "false", identity: request.identity },
            certificate: certificateValidUntil(request.identity, now - 60_000, now + CREDENTIAL_LIFETIME_MS),
          });
        }),
    };
  }

  /**
   * The site's durable stream as one container's bridge reads it on a tick: while this deployment
   * leads, the events waiting for the consumer (delivered, not acknowledged, and past their ack wait
   * or retry delay), oldest first, until none waits or the run's time is up. An event is delivered
   * to one run at a time; one a crashed run held comes again after the ack wait. A cut broker path
   * fails the run (no connection), and an acknowledgement sent over it is lost.
   */
  private eventSource(container: Container): LifecycleEventSource {
    const { fleet, time } = this.world;
    const cut = () => this.paths.brokerCutUntil > time.now;
    return {
      run: async ({ until, leadsNow, forward }) => {
        if (cut()) throw new SimFault("simulated: the broker path is cut, no connection");
        if (!(await leadsNow())) return { mode: "jetstream", led: false };
        for (;;) {
          if (container.clock.monotonic() >= until || cut()) break;
          const now = time.now;
          const batch = fleet.stream.filter((event) => !event.acked && event.deliverableAt <= now).slice(0, 50);
          if (batch.length === 0) break;
          for (const event of batch) {
            event.deliveries++;
            event.deliverableAt = now + STREAM_ACK_WAIT_MS;
          }
          // The fetch's round trip.
          await container.clock.sleep(20);
          if (!(await leadsNow())) {
            if (!cut()) batch.forEach((event) => (event.deliverableAt = time.now));
            break;
          }
          const outcomes = await forward(batch.map((event) => ({ data: event.body, subject: "choria.lifecycle.event.startup.provision_mode_server", lastChance: event.deliveries >= STREAM_MAX_DELIVERIES })));
          if (cut()) continue;
          batch.forEach((event, index) => {
            if (outcomes[index] === "retry") event.deliverableAt = time.now + STREAM_RETRY_DELAY_MS;
            else event.acked = true;
          });
        }
        return { mode: "jetstream", led: true };
      },
    };
  }
}
