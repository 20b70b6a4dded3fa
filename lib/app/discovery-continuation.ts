/**
 * Discovery continuations (docs/behaviour.md §5): a discovery that left names out (its deadline, its
 * pacing, or the new-names budget) after admitting at least one host queues one message on the
 * deployment's lifecycle queue, and the lifecycle function runs the next discovery at once, under
 * the same lease term, instead of the rest waiting for the next scheduled discovery. The term is a
 * fencing token: a continuation of a term this deployment no longer holds is dropped. A chain of
 * continuations ends one interval after the discovery that began it: by then the next scheduled
 * discovery has begun its own, so chains never pile up on the lifecycle function the ticks need.
 */
import { controlBody, controlContent } from "./control-message";

/** The body of a continuation message. */
export interface DiscoveryContinuation {
  /** The lease term the discovery ran under. */
  term: number;
  /** Wall-clock ms after which this chain queues no further continuation. */
  until: number;
}

const CONTINUATION_FIELD = "provisionerDiscoveryContinuation";

export function continuationBody(continuation: DiscoveryContinuation): string {
  return controlBody(CONTINUATION_FIELD, { term: continuation.term, until: continuation.until });
}

/** The continuation a lifecycle queue message holds; undefined for anything else (a tick, a queued startup event). */
export function parseContinuation(body: string): DiscoveryContinuation | undefined {
  const { term, until } = controlContent(body, CONTINUATION_FIELD) ?? {};
  if (typeof term !== "number" || !Number.isSafeInteger(term) || term < 0) return undefined;
  return typeof until === "number" && Number.isFinite(until) ? { term, until } : undefined;
}
