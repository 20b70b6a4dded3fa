/** `lifecycle` (SQS lifecycle queue, ReportBatchItemFailures): startup events of provisioning-mode nodes -> admitted host work. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { LifecycleEvents } from "../../app/lifecycle-events";
import type { AppSettings } from "../settings";
import type { AppOverrides } from "../compose";
import { composeBrokerFunction, type BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import { batchResponse, queueMessagesOf } from "../sqs-batch";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface LifecycleFunction {
  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  close(): Promise<void>;
}

export function lifecycleBatchUseCase({ parts, admission, invocations }: BrokerFunctionParts): LifecycleFunction["handleLifecycleBatch"] {
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
  return (event, ctx) => invocations.run(ctx, async () => batchResponse(await events.handle(queueMessagesOf(event))));
}

export async function composeLifecycle(settings: AppSettings, overrides: AppOverrides = {}): Promise<LifecycleFunction> {
  const composed = await composeBrokerFunction(settings, "lifecycle", overrides);
  return { handleLifecycleBatch: lifecycleBatchUseCase(composed), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<LifecycleFunction>) {
  return wrapHandler(getFunction, (fn, event: SQSEvent, context): Promise<SQSBatchResponse> => fn.handleLifecycleBatch(event, context));
}

export const handler = makeHandler(lazyFunction(composeLifecycle));
