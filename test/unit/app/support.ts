/**
 * One deployment's use-case world over in-memory ports: the real lease gate over a MemoryLeaseStore,
 * the real admission registry over a MemoryAdmissionStore, in-memory queues, a fake broker and a
 * virtual clock. Deployments built on the same stores and clock contest one lease.
 */
import { MemoryAdmissionStore } from "../../support/stores/memory-admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { AdmissionKey } from "../../../lib/ports/admission-entry";
import type { AdmissionStore, AdmitRequest } from "../../../lib/ports/admission-store";
import { AdmissionFlow } from "../../../lib/app/admission-flow";
import { buildLifecycleEvent, encodeLifecycleEvent } from "../../../lib/choria/lifecycle";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseGate } from "../../../lib/ports/lease-gate";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { FakeBroker, InMemoryQueue, RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";
import { parseTick, TickArming } from "../../../lib/app/ticks";
import { Leadership, type LeadershipDeps } from "../../../lib/app/leadership";

type TickTiming = ConstructorParameters<typeof TickArming>[0]["timing"];

export const SITE = "lab";
export const INTERVAL_MS = 120_000;
export const COMPONENT = "provision_mode_server";

export interface Shared {
  clock: VirtualClock;
  leaseStore: LeaseStore;
  admissionStore: MemoryAdmissionStore;
}

export function shared(overrides: Partial<Shared> = {}): Shared {
  return { clock: new VirtualClock(), leaseStore: new MemoryLeaseStore(), admissionStore: new MemoryAdmissionStore(), ...overrides };
}

export interface World extends Shared {
  deploymentId: string;
  leaderElection: boolean;
  logger: RecordingLogger;
  metrics: RecordingMetrics;
  gate: LeaseGate;
  registry: AdmissionRegistry;
  queues: { hostWork: InMemoryQueue; hostWorkDlq: InMemoryQueue; lifecycle: InMemoryQueue; lifecycleDlq: InMemoryQueue };
  admission: AdmissionFlow;
  broker: FakeBroker;
  /** What the gate calls when a round wins a new term (set by the test, e.g. to Leadership.onWonTerm). */
  onWon: { handler?: (term: number, remainingMs?: () => number) => Promise<void> };
}

export function world(options: { deploymentId?: string; leaderElection?: boolean; shared?: Shared } = {}): World {
  const base = options.shared ?? shared();
  const deploymentId = options.deploymentId ?? "east";
  const leaderElection = options.leaderElection ?? true;
  const logger = new RecordingLogger();
  const metrics = new RecordingMetrics();
  const onWon: World["onWon"] = {};
  const gate = createLeaseGate(resolveLeaseSettings({ leaderElection, site: SITE, deploymentId }), {
    store: base.leaseStore,
    metrics,
    clock: base.clock,
    logger,
    onWon: (term, remainingMs) => onWon.handler?.(term, remainingMs),
  });
  const registry = new AdmissionRegistry({ site: SITE, intervalMs: INTERVAL_MS }, { store: base.admissionStore, metrics, clock: base.clock, logger });
  const queues = {
    hostWork: new InMemoryQueue(`memory://${deploymentId}/host-work`),
    hostWorkDlq: new InMemoryQueue(`memory://${deploymentId}/host-work-dlq`),
    lifecycle: new InMemoryQueue(`memory://${deploymentId}/lifecycle`),
    lifecycleDlq: new InMemoryQueue(`memory://${deploymentId}/lifecycle-dlq`),
  };
  const admission = new AdmissionFlow({ registry, hostWork: queues.hostWork, logger });
  return { ...base, deploymentId, leaderElection, logger, metrics, gate, registry, queues, admission, broker: new FakeBroker(), onWon };
}

/** A lease store whose every call fails (an unreachable DynamoDB). */
export function unreachableLeaseStore(): LeaseStore {
  const fail = async (): Promise<never> => {
    throw new Error("connect ETIMEDOUT");
  };
  return { claim: fail, extend: fail, release: fail, markAnnounced: fail, recordPeer: fail, read: fail };
}

/** A working lease store that fails its next calls when told to (a DynamoDB that stops answering for a moment). */
export function blippingLeaseStore(store: LeaseStore = new MemoryLeaseStore()): LeaseStore & { failNextCalls(count: number): void; failedCalls(): number } {
  let failing = 0;
  let failed = 0;
  const call = <T>(run: () => Promise<T>): Promise<T> => {
    if (failing === 0) return run();
    failing--;
    failed++;
    return Promise.reject(new Error("TimeoutError: Request did not complete within 1500 ms"));
  };
  return {
    claim: (request) => call(() => store.claim(request)),
    extend: (request) => call(() => store.extend(request)),
    release: (request) => call(() => store.release(request)),
    markAnnounced: (request) => call(() => store.markAnnounced(request)),
    recordPeer: (request) => call(() => store.recordPeer(request)),
    read: (site) => call(() => store.read(site)),
    failNextCalls: (count) => {
      failing = count;
    },
    failedCalls: () => failed,
  };
}

/** The store, failing its next `failing.calls` calls of any kind (an admission table that stops answering for a moment). */
export function blippingAdmissionStore(store: AdmissionStore): { store: AdmissionStore; failing: { calls: number; failed: number } } {
  const failing = { calls: 0, failed: 0 };
  const wrapped = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (failing.calls > 0) {
          failing.calls--;
          failing.failed++;
          return Promise.reject(new Error("TimeoutError: a request has exceeded the configured 3000 ms requestTimeout"));
        }
        return (value as (...args: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: wrapped, failing };
}

/** How long an admission whose answer was lost is sent again for, in the tests that lose answers. */
export const RESEND_UNKNOWN = { pauseMs: 1_000, withinMs: 13_000 };

/** The world's admission flow, over another admission store (one that fails or loses answers). */
export function admissionFlowOver(w: World, store: AdmissionStore, options: { resendUnknown?: typeof RESEND_UNKNOWN } = {}): AdmissionFlow {
  const registry = new AdmissionRegistry({ site: SITE, intervalMs: INTERVAL_MS }, { store, metrics: w.metrics, clock: w.clock, logger: w.logger });
  return new AdmissionFlow({ registry, hostWork: w.queues.hostWork, logger: w.logger, ...(options.resendUnknown ? { clock: w.clock, resendUnknown: options.resendUnknown } : {}) });
}

/**
 * The admission table under a burst: the first admit write of each host lands but its answer is
 * lost, and the read that would settle it gets no answer either; the store answers normally after that.
 */
export function answerLostOnce(store: AdmissionStore): AdmissionStore {
  const lost = new Set<string>();
  const unanswered = new Set<string>();
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property === "admit") {
        return async (request: AdmitRequest) => {
          const result = await target.admit(request);
          if (lost.has(request.entry.identity)) return result;
          lost.add(request.entry.identity);
          throw new Error("TimeoutError: a request has exceeded the configured 3000 ms requestTimeout");
        };
      }
      if (property === "read") {
        return async (key: AdmissionKey) => {
          if (unanswered.has(key.identity)) return target.read(key);
          unanswered.add(key.identity);
          throw new Error("TimeoutError: a request has exceeded the configured 3000 ms requestTimeout");
        };
      }
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The store, except that every call about `identity` fails (a throttled or unreachable table for that key). */
export function admissionStoreFailingFor(store: AdmissionStore, identity: string): AdmissionStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (request: { identity?: string; entry?: { identity: string } }) =>
        (request.identity ?? request.entry?.identity) === identity
          ? Promise.reject(new Error("ProvisionedThroughputExceededException"))
          : (value as (request: unknown) => unknown).call(target, request);
    },
  });
}

/** A startup event of `identity` as a node publishes it (Choria format). */
export function startupEvent(identity: string, clock: VirtualClock, component = COMPONENT): string {
  const event = buildLifecycleEvent({ type: "startup", identity, component, timestampMs: clock.now() });
  return new TextDecoder().decode(encodeLifecycleEvent(event, "choria"));
}

/** A context with a fixed remaining budget. */
export function context(remainingMs = 60_000, requestId?: string) {
  return { remainingMs: () => remainingMs, ...(requestId ? { requestId } : {}) };
}

/** A tick as it landed on a queue: when it is due (wall-clock ms) and the delay SQS holds it back for. */
export interface ArmedTick {
  dueAt: number;
  delaySeconds: number | undefined;
}

/** The ticks sent to `queue` (lib/app/ticks.ts), in the order sent; other messages are left out. */
export function armedTicks(queue: InMemoryQueue): ArmedTick[] {
  return queue.sent.flatMap((message) => {
    const tick = parseTick(message.body);
    return tick ? [{ dueAt: tick.dueAt, delaySeconds: message.delaySeconds }] : [];
  });
}

/** Arms ticks on the world's lifecycle queue as the keeper does on AWS: one per 10 s keep interval, a minute ahead. */
export function tickArming(w: Pick<World, "queues" | "clock" | "logger">, timing: TickTiming = { keepIntervalMs: 10_000, armAheadMs: 60_000 }): TickArming {
  return new TickArming({ queue: w.queues.lifecycle, timing, clock: w.clock, logger: w.logger });
}

/**
 * The use case over a world; `admission` may be a stand-in (one that takes time, say). Discovery is
 * unpaced unless `discoveryBacklogMs` says otherwise: nothing takes work off these queues.
 */
export function leadership(
  w: Omit<World, "admission"> & { admission: LeadershipDeps["admission"] },
  overrides: { deadlineMarginMs?: number; discoveryMaxNodes?: number; discoveryNewNamesPerInterval?: number; discoveryBacklogMs?: number; registry?: LeadershipDeps["registry"] } = {},
): Leadership {
  const useCase = new Leadership({
    settings: {
      leaderElection: w.leaderElection,
      identity: `provisioner.${w.deploymentId}`,
      discoveryMaxNodes: overrides.discoveryMaxNodes ?? 1_000,
      discoveryNewNamesPerInterval: overrides.discoveryNewNamesPerInterval ?? 1_000,
      discoveryIntervalMs: 60_000,
      discoveryBacklogMs: overrides.discoveryBacklogMs ?? 0,
      allowShortIdentities: false,
      deadlineMarginMs: overrides.deadlineMarginMs ?? 1_000,
    },
    gate: w.gate,
    ticks: tickArming(w),
    broker: w.broker,
    admission: w.admission,
    registry: overrides.registry ?? w.registry,
    hostWork: w.queues.hostWork,
    continuations: w.queues.lifecycle,
    clock: w.clock,
    logger: w.logger,
    metrics: w.metrics,
  });
  w.onWon.handler = (term, remainingMs) => useCase.onWonTerm(term, remainingMs);
  return useCase;
}
