/** `lifecycleBridge` (EventBridge schedule, every minute): forwards startup lifecycle events from the broker to the lifecycle queue (docs/lifecycle.md). */
import { LifecycleBridge } from "../../app/lifecycle-events";
import type { LifecycleEventSource } from "../../app/use-case-ports";
import type { AppSettings } from "../settings";
import type { AppOverrides } from "../compose";
import { composeBrokerFunction, lifecycleEventSource, type BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import type { BridgeResult } from "../../app/lifecycle-events";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface LifecycleBridgeFunction {
  bridgeLifecycle(ctx: InvocationContext): Promise<BridgeResult>;
  close(): Promise<void>;
}

export function bridgeLifecycleUseCase({ parts, invocations }: BrokerFunctionParts, source: LifecycleEventSource): LifecycleBridgeFunction["bridgeLifecycle"] {
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
  return (ctx) => invocations.run(ctx, () => bridge.run(ctx));
}

export async function composeLifecycleBridge(settings: AppSettings, overrides: AppOverrides = {}): Promise<LifecycleBridgeFunction> {
  const composed = await composeBrokerFunction(settings, "lifecycleBridge", overrides);
  return { bridgeLifecycle: bridgeLifecycleUseCase(composed, lifecycleEventSource(composed.parts, composed.broker)), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<LifecycleBridgeFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.bridgeLifecycle(context));
}

export const handler = makeHandler(lazyFunction(composeLifecycleBridge));
