/**
 * `lifecycle` (SQS lifecycle queue, ReportBatchItemFailures): the deployment's ticks (a lease round,
 * then the startup events waiting on the broker, lib/app/ticks.ts) and any startup event queued
 * there (a node in provisioning mode -> admitted host work).
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { LifecycleBridge, LifecycleEvents } from "../../app/lifecycle-events";
import { parseTick, Ticks, type Tick } from "../../app/ticks";
import type { InvocationContext, LifecycleEventSource, QueueMessage } from "../../app/use-case-ports";
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
  const { parts, admission, invocations } = composed;
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
  const handleLifecycleBatch: LifecycleFunction["handleLifecycleBatch"] = (event, ctx) =>
    invocations.run(ctx, async () => {
      const { tickList, queued } = sortBatch(queueMessagesOf(event));
      // The queued events first: a tick may take the rest of the invocation's slot.
      const result = await events.handle(queued);
      if (tickList.length > 0) await ticks.run(tickList, ctx);
      return batchResponse(result);
    });
  return { handleLifecycleBatch, close: parts.close };
}

/** A batch's ticks apart from its queued startup events. */
function sortBatch(messages: readonly QueueMessage[]): { tickList: Tick[]; queued: QueueMessage[] } {
  const tickList: Tick[] = [];
  const queued: QueueMessage[] = [];
  for (const message of messages) {
    const tick = parseTick(message.body);
    if (tick) tickList.push(tick);
    else queued.push(message);
  }
  return { tickList, queued };
}

export function makeHandler(getFunction: () => Promise<LifecycleFunction>) {
  return wrapHandler(getFunction, (fn, event: SQSEvent, context): Promise<SQSBatchResponse> => fn.handleLifecycleBatch(event, context));
}
