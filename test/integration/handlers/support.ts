import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand, SQSClient, type Message } from "@aws-sdk/client-sqs";
import type { Context, SQSEvent, SQSRecord } from "aws-lambda";
import { createAdmissionTable } from "../../../lib/admission/dynamodb-admission-store";
import { APP_DEFAULTS, createApp, type App, type AppSettings } from "../../../lib/app";
import { createLeaseTable } from "../../../lib/lease/dynamodb-lease-store";
import { LOCAL_AWS, type RunningSqs } from "../../../lib/local/services";
import { InMemoryMetrics } from "../../../lib/observability";
import { silentLogger } from "../../../lib/ports";

export const HELPER = "node examples/helpers/provision-helper.mjs";

export interface Queues {
  hostWork: string;
  hostWorkDlq: string;
  lifecycle: string;
  lifecycleDlq: string;
}

export function sqsClient(url: string): SQSClient {
  return new SQSClient({ ...LOCAL_AWS, endpoint: url });
}

export function dynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ ...LOCAL_AWS, endpoint });
}

export async function createQueues(sqs: RunningSqs, client: SQSClient, prefix: string): Promise<Queues> {
  const withDlq = async (name: string) => {
    const dlq = sqs.createQueue(`${prefix}-${name}-dlq`);
    const { Attributes } = await client.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ["QueueArn"] }));
    const queue = sqs.createQueue(`${prefix}-${name}`, {
      VisibilityTimeout: "30",
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes?.QueueArn, maxReceiveCount: 5 }),
    });
    return [queue, dlq] as const;
  };
  const [hostWork, hostWorkDlq] = await withDlq("host-work");
  const [lifecycle, lifecycleDlq] = await withDlq("lifecycle");
  return { hostWork, hostWorkDlq, lifecycle, lifecycleDlq };
}

export async function createTables(client: DynamoDBClient, prefix: string): Promise<{ lease: string; admission: string }> {
  const lease = `${prefix}-lease`;
  const admission = `${prefix}-admission`;
  await Promise.all([createLeaseTable(client, lease), createAdmissionTable(client, admission)]);
  return { lease, admission };
}

export interface DeploymentOptions {
  deploymentId: string;
  site: string;
  natsUrl: string;
  dynamoEndpoint: string;
  sqsUrl: string;
  queues: Queues;
  tables: { lease: string; admission: string };
  extraYaml?: string;
}

export interface Deployment {
  app: App;
  metrics: InMemoryMetrics;
  settings: AppSettings;
}

export async function startDeployment(options: DeploymentOptions): Promise<Deployment> {
  const yaml = [
    `site: ${options.site}`,
    `deployment_id: ${options.deploymentId}`,
    `helper: ${HELPER}`,
    "choria_insecure: true",
    "leader_election: true",
    "workers: 4",
    `broker_urls: ["${options.natsUrl}"]`,
    options.extraYaml ?? "",
  ].join("\n");
  const settings: AppSettings = {
    configEnv: { PROVISIONER_CONFIG_YAML: yaml },
    leaseTable: options.tables.lease,
    admissionTable: options.tables.admission,
    hostWorkQueueUrl: options.queues.hostWork,
    hostWorkDlqUrl: options.queues.hostWorkDlq,
    lifecycleQueueUrl: options.queues.lifecycle,
    lifecycleDlqUrl: options.queues.lifecycleDlq,
    dynamoDbEndpoint: options.dynamoEndpoint,
    sqsEndpoint: options.sqsUrl,
    region: "us-east-1",
    lifecycleStream: APP_DEFAULTS.lifecycleStream,
    serviceName: "test",
    metricsNamespace: "Test",
    retryBaseDelaySeconds: 1,
    retryMaxDelaySeconds: 2,
    deadlineMarginMs: 1_000,
  };
  const metrics = new InMemoryMetrics(options.site);
  const app = await createApp(settings, { metrics, logger: silentLogger });
  return { app, metrics, settings };
}

/** A Lambda context with the given time budget. */
export function lambdaContext(budgetMs = 60_000): Context {
  const started = Date.now();
  return {
    awsRequestId: randomUUID(),
    functionName: "test",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:test",
    memoryLimitInMB: "256",
    logGroupName: "test",
    logStreamName: "test",
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: () => budgetMs - (Date.now() - started),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Receives what is visible now (up to `max`), as the messages SQS would hand a Lambda. */
export async function receive(client: SQSClient, queueUrl: string, max = 10): Promise<Message[]> {
  const messages: Message[] = [];
  for (;;) {
    const { Messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, max - messages.length),
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
        WaitTimeSeconds: 0,
      }),
    );
    messages.push(...Messages);
    if (Messages.length === 0 || messages.length >= max) return messages;
  }
}

export function toRecord(message: Message, queueUrl: string): SQSRecord {
  const attributes = message.Attributes ?? {};
  return {
    messageId: message.MessageId ?? randomUUID(),
    receiptHandle: message.ReceiptHandle ?? "",
    body: message.Body ?? "",
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? "1",
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? "local",
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([name, value]) => [
        name,
        { dataType: value.DataType ?? "String", stringValue: value.StringValue },
      ]),
    ),
    md5OfBody: message.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${queueUrl.split("/").pop()}`,
    awsRegion: "us-east-1",
  };
}

export function sqsEvent(messages: Message[], queueUrl: string): SQSEvent {
  return { Records: messages.map((message) => toRecord(message, queueUrl)) };
}

export async function send(client: SQSClient, queueUrl: string, body: string): Promise<void> {
  await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
}
