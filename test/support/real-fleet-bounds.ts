/**
 * How long the real-fleet suites (test/realfleet) wait for a real go-choria node, taken from the
 * protocol each step follows (go-choria's connect timeout and backoff, its restart splay, the host
 * work and lifecycle queues' redelivery) instead of from how fast an idle machine is: on this
 * 2-core machine another real fleet beside a file may push the load past 10, and a wait that only
 * fits an idle machine then fails a run that is merely slow. The waits end as soon as their
 * condition holds, so a generous bound costs nothing when the run is healthy.
 */
import { waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import type { StackTimings } from "../../dev/local/stack";
import { RESTART_SPLAY_SECONDS } from "../../lib/engine/plan";

/** go-choria's plugin.choria.network.connect_timeout (default 2 s): one try's TCP, TLS and authentication. */
const CONNECT_TIMEOUT_MS = 2_000;
/** The longest pause between a node's connect tries: backoff.FiveSec's last step, 5 s, with its jitter up to 1.5x. */
const CONNECT_BACKOFF_MAX_MS = 7_500;
/** Tries allowed for: on a loaded machine several TLS handshakes may miss their 2 s (the broker allows 2 s too). */
const CONNECT_TRIES = 10;

/**
 * A started node is connected, subscribed and has published its startup event within this: ten
 * tries of 2 s with the longest backoff before each (95 s). Startup itself (exec, configuration,
 * agents) takes well under a second of CPU.
 */
export const NODE_CONNECT_BOUND_MS = CONNECT_TRIES * (CONNECT_TIMEOUT_MS + CONNECT_BACKOFF_MAX_MS);

/** go-choria's `restart` sleeps rand.N(splay) + 2 s before it re-executes (restart_action.go): at most splay + 1 s. */
const RESTART_BOUND_MS = (RESTART_SPLAY_SECONDS + 1) * 1_000;

/** The stack holds its first term: the keeper's first invocation claims the empty lease, or the next one does. */
export function termBoundMs(timings: StackTimings): number {
  return timings.keeperRateMs + timings.keeperTimeoutMs;
}

/**
 * A host admitted to the host-work queue is configured, restarted and back on the target broker
 * within this: every provision attempt the queue allows (each over at the latest when its message
 * is visible again, after the function's timeout), the restart's splay and the reconnect.
 */
export function provisionBoundMs(timings: StackTimings): number {
  return timings.hostWork.maxReceiveCount * timings.hostWork.visibilitySeconds * 1_000 + RESTART_BOUND_MS + NODE_CONNECT_BOUND_MS;
}

/** A startup event in the stream is admitted within this: a generous bound on every redelivery a tick may hand back (the lifecycle queue's own bound). */
export function eventAdmissionBoundMs(timings: StackTimings): number {
  return timings.lifecycle.maxReceiveCount * timings.lifecycle.visibilitySeconds * 1_000;
}

/**
 * Waits until every node published its provisioning-mode startup event on the provisioning
 * broker. go-choria publishes it after it subscribed its agents and node subject, so from then on
 * a discovery broadcast reaches the node: a stack started after this finds it with the discovery
 * of its first term, however long the node took to start.
 */
export function waitInProvisioningMode(provisioned: ProvisionedFleet, identities: string[], timeoutMs = NODE_CONNECT_BOUND_MS): Promise<void> {
  return waitUntil(() => {
    const announced = provisioned.provisioningEvents.identities("startup", "provision_mode_server");
    const missing = identities.filter((identity) => !announced.has(identity));
    return missing.length === 0 ? undefined : `no provisioning-mode startup event on the provisioning broker from ${missing.join(", ")}`;
  }, timeoutMs);
}
