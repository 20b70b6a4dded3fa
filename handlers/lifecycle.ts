/** SQS (lifecycle queue, ReportBatchItemFailures): the deployment's ticks, and startup events queued there (docs/lifecycle.md). */
import { lifecycleEventSource } from "../lib/aws/compose-broker";
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { lifecycleFunction, makeHandler } from "../lib/aws/functions/lifecycle";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(
  lazyFunction(brokerFunction("lifecycle", async (composed) => lifecycleFunction(composed, await lifecycleEventSource(composed.parts, composed.broker)))),
);
