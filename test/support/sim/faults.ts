/**
 * The faults of one simulated run: rates drawn from the seed, the PRNG every random choice comes
 * from, and the count of each fault class that actually struck. A class the schedules never hit
 * tested nothing, so a run reports it.
 */
import { ProvisionerError } from "../../../lib/errors";
import { seededRandom } from "../random";
import type { Container, VirtualTime } from "./time";

export const FAULT_CLASSES = [
  "store-delay",
  "store-request-lost",
  "store-answer-lost",
  "store-stall",
  "rpc-request-held",
  "rpc-reply-lost",
  "broker-partition",
  "sqs-duplicate",
  "sqs-send-ambiguous",
  "sqs-visibility-expired",
  /** A tick the keeper armed never reaches the lifecycle function (SQS or its poller lost it). */
  "tick-lost",
  /** A tick reaches the lifecycle function seconds after it was due (a busy poller, a cold start). */
  "tick-late",
  "helper-failure",
  "helper-defer",
  "helper-late",
  "container-crash",
  "container-freeze",
  "clock-skew",
  "settings-differ",
  "node-restart",
  "operator-pause",
  "operator-release",
  /** A stalled leader led again, with work of its earlier term in hand (world.ts, handover-and-back). */
  "lease-handed-back",
  "operator-reprovision",
  "operator-renew",
] as const;

export type FaultClass = (typeof FAULT_CLASSES)[number];

export interface FaultRates {
  storeDelay: number;
  storeRequestLost: number;
  storeAnswerLost: number;
  rpcRequestHeld: number;
  rpcReplyLost: number;
  sqsDuplicate: number;
  sqsSendAmbiguous: number;
  helperFailure: number;
  helperDefer: number;
  helperLate: number;
  /** Of the ticks armed, the share lost on the way (absent: none). */
  tickLost?: number;
  /** Of the ticks armed, the share delivered late (absent: none). */
  tickLate?: number;
}

/** An injected failure, named as such in every log and error it reaches. */
export class SimFault extends ProvisionerError {}

export class Faults {
  readonly random: () => number;
  readonly hits = new Map<FaultClass, number>();
  /** Faults strike only while this is true (the run's last phase heals everything). */
  active = true;

  constructor(
    seed: number,
    readonly rates: FaultRates,
  ) {
    this.random = seededRandom(seed);
  }

  hit(kind: FaultClass): void {
    this.hits.set(kind, (this.hits.get(kind) ?? 0) + 1);
  }

  /** True (and counted) with probability `rate`, while faults are active. */
  strikes(kind: FaultClass, rate: number): boolean {
    if (!this.active || !(this.random() < rate)) return false;
    this.hit(kind);
    return true;
  }

  /** A uniform integer in [min, max]. */
  between(min: number, max: number): number {
    return min + Math.floor(this.random() * (max - min + 1));
  }
}

/** Until when a deployment's paths are held (store: answers wait) or cut (broker: nothing passes). */
export interface Paths {
  storeHeldUntil: number;
  brokerCutUntil: number;
}

/**
 * `store` as one container reaches it over the network: each call waits a little (sometimes
 * seconds), may be lost before it applies, or may apply and lose its answer (an ambiguous write),
 * and waits out a stall of the deployment's store path. Every method is wrapped, so a store that
 * grows a method is covered without change here.
 */
export function overNetwork<T extends object>(store: T, container: Container, time: VirtualTime, faults: Faults, paths: Paths): T {
  const latency = () => (faults.strikes("store-delay", faults.rates.storeDelay) ? faults.between(1_000, 6_000) : faults.between(2, 40));
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) =>
        container.send(async () => {
          await time.sleep(latency() + Math.max(0, paths.storeHeldUntil - time.now));
          if (faults.strikes("store-request-lost", faults.rates.storeRequestLost)) {
            throw new SimFault(`simulated: the ${String(property)} request was lost before it reached the store`);
          }
          const answer = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          await time.sleep(latency() + Math.max(0, paths.storeHeldUntil - time.now));
          if (faults.strikes("store-answer-lost", faults.rates.storeAnswerLost)) {
            throw new SimFault(`simulated: the ${String(property)} request applied and its answer was lost`);
          }
          return answer;
        });
    },
  });
}
