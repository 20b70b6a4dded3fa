/**
 * The gate while leader election is off (`leader_election: false`): always open, at one term, and
 * the lease store is never used.
 */
import { METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Metrics } from "../ports/metrics";
import type { LeaseGate } from "../ports/lease-gate";

/** The term every piece of work carries when leader election is off. */
const UNELECTED_TERM = 0;

export function unelectedGate(metrics: Metrics, clock: Clock): LeaseGate {
  const open = () => metrics.gauge(METRIC.paused, 0);
  return {
    beginInvocation() {},
    async assertOpen(term, attemptTimeoutMs) {
      open();
      return { term, stampedAt: clock.now(), endsBy: clock.monotonic() + attemptTimeoutMs };
    },
    async currentTerm() {
      open();
      return UNELECTED_TERM;
    },
    async standing() {
      open();
      return { kind: "leading", term: UNELECTED_TERM };
    },
    async acquireOrKeep() {
      open();
      return { holding: true, term: UNELECTED_TERM, wonNewTerm: false, tookOver: false, validForMs: Number.POSITIVE_INFINITY };
    },
    async release() {
      return false;
    },
  };
}
