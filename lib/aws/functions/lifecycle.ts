/** `lifecycle` (SQS lifecycle queue, ReportBatchItemFailures): startup events of provisioning-mode nodes -> admitted host work. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { LifecycleEvents } from "../../app/lifecycle-events";
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { batchResponse, queueMessagesOf } from "../sqs-batch";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface LifecycleFunction {
  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  close(): Promise<void>;
}

/** The function on its composed parts: its handler's (handlers/lifecycle.ts) and the whole local stack's. */
export function lifecycleFunction({ parts, admission, invocations }: BrokerFunctionParts): LifecycleFunction {
  const events = new LifecycleEvents({
    component: parts.config.lifecycleComponent,
    gate: parts.gate,
    admission,
    registry: parts.registry,
    skewBoundMs: parts.config.lease.skewBoundMs,
    lifecycleDlq: parts.queues.lifecycleDlq,
    logger: parts.logger,
    metrics: parts.metrics,
  });
  return { handleLifecycleBatch: (event, ctx) => invocations.run(ctx, async () => batchResponse(await events.handle(queueMessagesOf(event)))), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<LifecycleFunction>) {
  return wrapHandler(getFunction, (fn, event: SQSEvent, context): Promise<SQSBatchResponse> => fn.handleLifecycleBatch(event, context));
}
