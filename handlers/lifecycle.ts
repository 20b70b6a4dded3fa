/** SQS (lifecycle queue, ReportBatchItemFailures): startup events of provisioning-mode nodes -> admitted host work. */
export { handler, makeHandler } from "../lib/aws/functions/lifecycle";
