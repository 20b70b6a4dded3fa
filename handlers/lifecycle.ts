/** SQS (lifecycle queue, ReportBatchItemFailures): startup events of provisioning-mode nodes -> admitted host work. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app, event: SQSEvent, context): Promise<SQSBatchResponse> => app.handleLifecycleBatch(event, context));
}

export const handler = makeHandler(lazyApp("lifecycle"));
