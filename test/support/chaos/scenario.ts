/**
 * Figures a chaos or fuzz test attaches to itself, so `scripts/reliability-report.ts` can list every
 * scenario with what it put the system through, from vitest's JSON report alone (task meta is
 * carried into it). The assertions live in the tests; these numbers only describe them.
 */
import type { RunnerTestCase } from "vitest";

type ChaosArea = "leadership" | "infrastructure" | "hostile-node" | "hostile-helper" | "config" | "fuzz";

/** The kind of fault a leadership or infrastructure scenario injects, for the per-class counts. */
export type FaultClass =
  | "contention"
  | "crash"
  | "stalled-path"
  | "slow-store"
  | "ambiguous-write"
  | "store-blip"
  | "skew-within-bound"
  | "skew-beyond-bound"
  | "late-delivery-beyond-bound"
  | "release"
  | "sqs-entry-failure"
  | "broker-restart"
  | "other";

export interface ScenarioFigures {
  area: ChaosArea;
  /** Hosts provisioned or messages pushed through while the fault was active. */
  load: number;
  /** Faults injected (restarts, kills, delays, faulty nodes). */
  faults: number;
  /** Hostile or malformed inputs handed to the code under test. */
  badInputs: number;
  /** Admitted hosts that never ended provisioned, deferred or parked with a reason. */
  hostsLost: number;
  /** choria_provision calls a deployment sent after another deployment's term began. */
  duplicateSends: number;
  /** Node-side: requests a node ran after it had received one of a later term (observed at the node). */
  crossTermExecutions?: number;
  /** Node-side: requests the nodes ran, attributed to a term (how much the check above looked at). */
  nodeExecutions?: number;
  /** Lifecycle events accepted upstream that never reached the lifecycle queue or its DLQ. */
  eventsLost?: number;
  faultClass?: FaultClass;
  /** Release to the standby's new term, on the releaser's wall clock. */
  handoverMs?: number;
  /** The scenario deliberately breaks an assumption (clock skew past the bound): duplicateSends is reported, not required to be 0. */
  beyondBound?: boolean;
}

export const CHAOS_META_KEY = "chaos";

export function recordScenario(task: Pick<RunnerTestCase, "meta">, figures: Partial<ScenarioFigures> & Pick<ScenarioFigures, "area">): void {
  const complete: ScenarioFigures = { load: 0, faults: 0, badInputs: 0, hostsLost: 0, duplicateSends: 0, ...figures };
  (task.meta as Record<string, unknown>)[CHAOS_META_KEY] = complete;
}
