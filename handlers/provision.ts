/** SQS (host-work queue, ReportBatchItemFailures): provisions each host whose work is current; only failed items are reported. */
export { handler, makeHandler } from "../lib/aws/functions/provision";
