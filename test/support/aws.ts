/**
 * AWS plumbing the integration tests share: the services a suite's deployments run on (fauxqs,
 * the run's DynamoDB Local, a nats-server) with their clients, the queues (each with its
 * dead-letter queue) and tables a deployment needs, and receiving messages and handing them over
 * as an SQS event with a Lambda context, the way the event source mapping does.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient, type Message } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { inject } from "vitest";
import { createProvisionerTables, createQueueWithDeadLetter } from "../../dev/local/resources";
import { sqsRecordFromMessage } from "../../dev/local/lambda-runtime";
import { LOCAL_AWS, startNats, startSqs, type RunningNats, type RunningSqs } from "../../dev/local/services";
import { startedForSuite } from "./suite";

export interface Queues {
  hostWork: string;
  hostWorkDlq: string;
  lifecycle: string;
  lifecycleDlq: string;
}

export interface Tables {
  lease: string;
  admission: string;
}

/** Where a test deployment finds its queues and tables on the local emulators. */
export interface LocalResources {
  queues: Queues;
  tables: Tables;
  dynamoEndpoint: string;
  sqsUrl: string;
}

/** fauxqs started for one suite and the run's DynamoDB Local, with a client for each. */
export interface LocalAws {
  readonly sqs: RunningSqs;
  readonly sqsApi: SQSClient;
  readonly dynamo: DynamoDBClient;
  readonly dynamoEndpoint: string;
  /** Queues of its own for the deployment named `prefix`, and its own tables unless `tables` are given (shared). */
  resources(prefix: string, tables?: Tables): Promise<LocalResources>;
  /** Destroys the clients and stops what this suite started (not the run's DynamoDB Local). */
  stop(): Promise<void>;
}

/** `dynamoEndpoint`: the run's DynamoDB Local (global setup) unless a suite runs its own. */
export async function startLocalAws(dynamoEndpoint: string = inject("dynamoEndpoint")): Promise<LocalAws> {
  const sqs = await startSqs();
  const sqsApi = sqsClient(sqs.url);
  const dynamo = dynamoClient(dynamoEndpoint);
  return {
    sqs,
    sqsApi,
    dynamo,
    dynamoEndpoint,
    resources: async (prefix, tables) => ({
      queues: createQueues(sqs, prefix),
      tables: tables ?? (await createTables(dynamo, prefix)),
      dynamoEndpoint,
      sqsUrl: sqs.url,
    }),
    stop: async () => {
      sqsApi.destroy();
      dynamo.destroy();
      await sqs.stop();
    },
  };
}

/** Everything a deployment runs on: a nats-server of its own for the suite besides the local AWS services. */
export interface LocalServices extends LocalAws {
  readonly nats: RunningNats;
}

async function startServices(dynamoEndpoint?: string): Promise<LocalServices> {
  const [nats, aws] = await Promise.all([startNats(), startLocalAws(dynamoEndpoint)]);
  return {
    ...aws,
    nats,
    stop: async () => {
      await aws.stop();
      await nats.stop();
    },
  };
}

/** startServices for the suite or describe block this is called in: up before its first test, stopped after its last. */
export function servicesForSuite(dynamoEndpoint?: string): LocalServices {
  return startedForSuite(
    () => startServices(dynamoEndpoint),
    (services) => services.stop(),
  );
}

/** startLocalAws for the suite or describe block this is called in. */
export function localAwsForSuite(dynamoEndpoint?: string): LocalAws {
  return startedForSuite(
    () => startLocalAws(dynamoEndpoint),
    (aws) => aws.stop(),
  );
}

export function sqsClient(url: string): SQSClient {
  return new SQSClient({ ...LOCAL_AWS, endpoint: url });
}

export function dynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ ...LOCAL_AWS, endpoint });
}

export function createQueues(sqs: RunningSqs, prefix: string): Queues {
  const options = { maxReceiveCount: 5, attributes: { VisibilityTimeout: "30" } };
  const hostWork = createQueueWithDeadLetter(sqs, `${prefix}-host-work`, options);
  const lifecycle = createQueueWithDeadLetter(sqs, `${prefix}-lifecycle`, options);
  return { hostWork: hostWork.url, hostWorkDlq: hostWork.deadLetterUrl, lifecycle: lifecycle.url, lifecycleDlq: lifecycle.deadLetterUrl };
}

export async function createTables(client: DynamoDBClient, prefix: string): Promise<Tables> {
  const tables = { lease: `${prefix}-lease`, admission: `${prefix}-admission` };
  await createProvisionerTables(client, tables);
  return tables;
}

/** An invocation's remaining time, counting down from `budgetMs` in real time. */
export function remainingTime(budgetMs: number): () => number {
  const started = Date.now();
  return () => budgetMs - (Date.now() - started);
}

/** A Lambda context with the given time budget. */
export function lambdaContext(budgetMs = 60_000): Context {
  return {
    awsRequestId: randomUUID(),
    functionName: "test",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:test",
    memoryLimitInMB: "256",
    logGroupName: "test",
    logStreamName: "test",
    callbackWaitsForEmptyEventLoop: false,
    getRemainingTimeInMillis: remainingTime(budgetMs),
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

export function sqsEvent(messages: Message[], queueUrl: string): SQSEvent {
  const queueArn = `arn:aws:sqs:us-east-1:000000000000:${queueUrl.split("/").pop()}`;
  return { Records: messages.map((message) => sqsRecordFromMessage(message, queueArn)) };
}

/** Deletes received messages, as the event source mapping does with those a handler did not report as failed. */
export async function deleteMessages(client: SQSClient, queueUrl: string, messages: readonly Message[]): Promise<void> {
  for (let start = 0; start < messages.length; start += 10) {
    const entries = messages.slice(start, start + 10).map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle }));
    await client.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  }
}

/** One event-source-mapping poll: receive up to `max`, invoke, delete every record not reported as failed. */
export async function deliverOnce(
  client: SQSClient,
  queueUrl: string,
  invoke: (event: SQSEvent) => Promise<SQSBatchResponse>,
  max = 10,
): Promise<{ received: number; failed: number; response?: SQSBatchResponse }> {
  const messages = await receive(client, queueUrl, max);
  if (messages.length === 0) return { received: 0, failed: 0 };
  const response = await invoke(sqsEvent(messages, queueUrl));
  const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
  await deleteMessages(client, queueUrl, messages.filter((message) => !failed.has(message.MessageId ?? "")));
  return { received: messages.length, failed: failed.size, response };
}

/**
 * An SQS event holding one tick (lib/app/ticks.ts) due at `dueAt` (wall ms), as the lifecycle
 * function gets the delayed message its keeper armed: how a test runs a tick without waiting for
 * SQS's delay.
 */
export function tickEvent(queueUrl: string, dueAt: number = Date.now()): SQSEvent {
  const message: Message = { MessageId: randomUUID(), ReceiptHandle: randomUUID(), Body: JSON.stringify({ provisionerTick: { dueAt } }), Attributes: { ApproximateReceiveCount: "1" } };
  return sqsEvent([message], queueUrl);
}
