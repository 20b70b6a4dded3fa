/** SQS (host-work queue, ReportBatchItemFailures): provisions each host whose work is current; only failed items are reported. */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { provisionFunction, makeHandler } from "../lib/aws/functions/provision";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("provision", provisionFunction)));
