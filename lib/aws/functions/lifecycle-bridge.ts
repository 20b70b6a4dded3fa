/** `lifecycleBridge` (EventBridge schedule, every minute): forwards startup lifecycle events from the broker to the lifecycle queue (docs/lifecycle.md). */
import { LifecycleBridge } from "../../app/lifecycle-events";
import type { LifecycleEventSource, InvocationContext } from "../../app/use-case-ports";
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import type { BridgeResult } from "../../app/lifecycle-events";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface LifecycleBridgeFunction {
  bridgeLifecycle(ctx: InvocationContext): Promise<BridgeResult>;
  close(): Promise<void>;
}

/**
 * The function on its composed parts and the broker's lifecycle events (`lifecycleEventSource`):
 * its handler's (handlers/lifecycle-bridge.ts) and the whole local stack's.
 */
export function lifecycleBridgeFunction({ parts, invocations }: BrokerFunctionParts, source: LifecycleEventSource): LifecycleBridgeFunction {
  const { config } = parts;
  const bridge = new LifecycleBridge({
    settings: { leaderElection: config.leaderElection, site: config.site, deploymentId: config.deploymentId, skewBoundMs: config.lease.skewBoundMs },
    ...(parts.leaseStore ? { leaseStore: parts.leaseStore } : {}),
    ...(parts.pauseStore ? { pauseStore: parts.pauseStore } : {}),
    source,
    lifecycle: parts.queues.lifecycle,
    lifecycleDlq: parts.queues.lifecycleDlq,
    clock: parts.clock,
    logger: parts.logger,
    metrics: parts.metrics,
  });
  return { bridgeLifecycle: (ctx) => invocations.run(ctx, () => bridge.run(ctx)), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<LifecycleBridgeFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.bridgeLifecycle(context));
}
