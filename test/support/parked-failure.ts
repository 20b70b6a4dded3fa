/**
 * Where a host's failure lands once it is parked: the host-work DLQ's message attributes, the
 * admission table, `status` and the log. Drives one deployment through the discover and provision
 * handlers until its one failing host is parked, for suites that check nothing secret reaches any
 * of those places.
 */
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import type { Message } from "@aws-sdk/client-sqs";
import type { StatusFunctionReport } from "../../lib/app/operator/functions";
import { makeHandler as discoverHandler } from "../../handlers/discover";
import { makeHandler as provisionHandler } from "../../handlers/provision";
import { makeHandler as statusHandler } from "../../handlers/status";
import { lambdaContext, receive, sqsEvent, type LocalResources, type LocalServices } from "./aws";
import type { Deployment } from "./handlers";

export interface ParkedFailure {
  dead: Message[];
  status: StatusFunctionReport;
  /** Each place's text: the DLQ's attributes, the table's items, `status`, the log. */
  landed: Record<"dlq" | "table" | "status" | "log", string>;
}

/** `rounds` discoveries, each followed by a provision of what it queued; then where the failure landed. */
export async function provisionUntilParked(input: {
  services: LocalServices;
  resources: LocalResources;
  deployment: Deployment;
  logLines: readonly string[];
  rounds: number;
}): Promise<ParkedFailure> {
  const { services, resources } = input;
  const getApp = async () => input.deployment.app;
  const discover = discoverHandler(getApp);
  const provision = provisionHandler(getApp);
  for (let round = 1; round <= input.rounds; round++) {
    await discover({}, lambdaContext());
    const messages = await receive(services.sqsApi, resources.queues.hostWork);
    if (messages.length > 0) await provision(sqsEvent(messages, resources.queues.hostWork), lambdaContext());
  }
  const dead = await receive(services.sqsApi, resources.queues.hostWorkDlq);
  const table = await services.dynamo.send(new ScanCommand({ TableName: resources.tables.admission }));
  const status = (await statusHandler(getApp)({}, lambdaContext())) as StatusFunctionReport;
  return {
    dead,
    status,
    landed: {
      dlq: JSON.stringify(dead.map((message) => message.MessageAttributes)),
      table: JSON.stringify(table.Items),
      status: JSON.stringify(status),
      log: input.logLines.join("\n"),
    },
  };
}
