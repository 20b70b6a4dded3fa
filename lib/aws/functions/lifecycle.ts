/**
 * `lifecycle` (SQS lifecycle queue, ReportBatchItemFailures): the deployment's ticks (a lease round,
 * then the startup events waiting on the broker, lib/app/ticks.ts), its discovery continuations
 * (the next discovery at once, lib/app/discovery-continuation.ts), and any startup event queued
 * there (a node in provisioning mode -> admitted host work).
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { LifecycleBridge, LifecycleEvents } from "../../app/lifecycle-events";
import { LifecycleQueue } from "../../app/lifecycle-queue";
import { Ticks } from "../../app/ticks";
import type { InvocationContext, LifecycleEventSource } from "../../app/use-case-ports";
import { tickArming } from "../compose";
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { batchResponse, queueMessagesOf } from "../sqs-batch";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface LifecycleFunction {
  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  close(): Promise<void>;
}

/**
 * The function on its composed parts and the broker's lifecycle events (`lifecycleEventSource`):
 * its handler's (handlers/lifecycle.ts) and the whole local stack's.
 */
export function lifecycleFunction(composed: BrokerFunctionParts, source: LifecycleEventSource): LifecycleFunction {
  const { parts, admission, invocations, leadership } = composed;
  const { config } = parts;
  const events = new LifecycleEvents({
    component: config.lifecycleComponent,
    gate: parts.gate,
    admission,
    registry: parts.registry,
    skewBoundMs: config.lease.skewBoundMs,
    allowShortIdentities: config.allowShortIdentities,
    lifecycleDlq: parts.queues.lifecycleDlq,
    logger: parts.logger,
    metrics: parts.metrics,
  });
  const bridge = new LifecycleBridge({
    gate: parts.gate,
    source,
    events,
    lifecycleDlq: parts.queues.lifecycleDlq,
    logger: parts.logger,
    metrics: parts.metrics,
  });
  const ticks = new Ticks({ gate: parts.gate, bridge, arming: tickArming(parts), keepIntervalMs: config.lease.keepIntervalMs, clock: parts.clock, logger: parts.logger });
  // Its leadership runs the continuations' discoveries, as it runs the one a tick's won term announces.
  const queue = new LifecycleQueue({ events, ticks, leadership, logger: parts.logger });
  const handleLifecycleBatch: LifecycleFunction["handleLifecycleBatch"] = (event, ctx) =>
    invocations.run(ctx, async () => batchResponse(await queue.handle(queueMessagesOf(event), ctx)));
  return { handleLifecycleBatch, close: parts.close };
}

export function makeHandler(getFunction: () => Promise<LifecycleFunction>) {
  return wrapHandler(getFunction, (fn, event: SQSEvent, context): Promise<SQSBatchResponse> => fn.handleLifecycleBatch(event, context));
}
