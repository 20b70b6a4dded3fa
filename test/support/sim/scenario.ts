/**
 * Scenarios as fast-check generates them: deployments with skewed clocks and differing request
 * TTLs, a small fleet, fault rates, and a timed list of faults and operator actions in the run's
 * first phase. fast-check replays a seed exactly and shrinks a failing scenario towards fewer
 * events, fewer nodes and deployments and lower rates.
 */
import fc from "fast-check";
import { LEASE_TIMING, type DeploymentSpec } from "./deployment";
import type { FaultRates } from "./faults";
import { FAULT_PHASE_MS, type Scenario, type SimEvent, type SimFunction } from "./world";

const FUNCTIONS: readonly SimFunction[] = ["keeper", "discover", "provision", "lifecycle", "renew"];
const SKEW = LEASE_TIMING.skewBoundMs / 2;

/** Half the events fall in the first minutes, when most hosts are in flight; the rest anywhere in the phase. */
const at = fc.oneof(fc.integer({ min: 0, max: 5 * 60_000 }), fc.integer({ min: 0, max: FAULT_PHASE_MS - 1 }));
const deployment = fc.nat({ max: 2 });
const node = fc.nat({ max: 7 });
const short = (max: number) => fc.integer({ min: 1_000, max });

const event: fc.Arbitrary<SimEvent> = fc.oneof(
  fc.record({ at, kind: fc.constant("crash" as const), deployment, fn: fc.constantFrom(...FUNCTIONS) }),
  fc.record({ at, kind: fc.constant("freeze" as const), deployment, fn: fc.constantFrom(...FUNCTIONS), forMs: short(90_000) }),
  fc.record({ at, kind: fc.constant("stall-deployment" as const), deployment, forMs: fc.integer({ min: 20_000, max: 240_000 }) }),
  fc.record({ at, kind: fc.constant("cut-broker" as const), deployment, forMs: short(120_000) }),
  fc.record({ at, kind: fc.constant("stall-store" as const), deployment, forMs: short(60_000) }),
  fc.record({ at, kind: fc.constant("pause" as const), deployment, forMs: short(180_000) }),
  fc.record({ at, kind: fc.constant("release" as const) }),
  fc.record({ at, kind: fc.constant("handover-and-back" as const), releaseAfterMs: fc.integer({ min: 0, max: 30_000 }) }),
  fc.record({ at, kind: fc.constant("reprovision" as const), node }),
  fc.record({ at, kind: fc.constant("renew" as const), node }),
  fc.record({ at, kind: fc.constant("node-restart" as const), node }),
  fc.record({ at, kind: fc.constant("join" as const) }),
);

const spec = (index: number): fc.Arbitrary<DeploymentSpec> =>
  fc.record({
    id: fc.constant(`d${index}`),
    wallSkewMs: fc.integer({ min: -SKEW, max: SKEW }),
    rpcTtlSeconds: fc.constantFrom(30, 60, 120),
    workers: fc.integer({ min: 1, max: 4 }),
    intervalMs: fc.constantFrom(60_000, 180_000, 300_000),
  });

const rate = (max: number) => fc.double({ min: 0, max, noNaN: true });

const rates: fc.Arbitrary<FaultRates> = fc.record({
  storeDelay: rate(0.05),
  storeRequestLost: rate(0.03),
  storeAnswerLost: rate(0.03),
  rpcRequestHeld: rate(0.05),
  rpcReplyLost: rate(0.05),
  sqsDuplicate: rate(0.1),
  sqsSendAmbiguous: rate(0.05),
  helperFailure: rate(0.1),
  helperDefer: rate(0.1),
  helperLate: rate(0.05),
  tickLost: rate(0.2),
  tickLate: rate(0.2),
});

export const scenarios: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  deployments: fc.integer({ min: 2, max: 3 }).chain((count) => fc.tuple(...Array.from({ length: count }, (_, index) => spec(index)))),
  nodes: fc.integer({ min: 3, max: 8 }),
  rates,
  events: fc.array(event, { minLength: 2, maxLength: 20 }).map((events) => [...events].sort((a, b) => a.at - b.at)),
});
