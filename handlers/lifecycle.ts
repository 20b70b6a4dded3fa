/** SQS (lifecycle queue, ReportBatchItemFailures): startup events of provisioning-mode nodes -> admitted host work. */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { lifecycleFunction, makeHandler } from "../lib/aws/functions/lifecycle";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("lifecycle", lifecycleFunction)));
