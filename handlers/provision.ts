/** SQS (host-work queue, ReportBatchItemFailures): provisions each host whose work is current; only failed items are reported. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app, event: SQSEvent, context): Promise<SQSBatchResponse> => app.handleHostWorkBatch(event, context));
}

export const handler = makeHandler(lazyApp("provision"));
