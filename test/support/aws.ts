/**
 * AWS plumbing the integration tests share: clients for the local emulators, the queues (each with
 * its dead-letter queue) and tables a deployment needs, and receiving messages and handing them over
 * as an SQS event with a Lambda context, the way the event source mapping does.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ReceiveMessageCommand, SQSClient, type Message } from "@aws-sdk/client-sqs";
import type { Context, SQSEvent } from "aws-lambda";
import { createProvisionerTables, createQueueWithDeadLetter } from "../../dev/local/resources";
import { sqsRecordFromMessage } from "../../dev/local/lambda-runtime";
import { LOCAL_AWS, type RunningSqs } from "../../dev/local/services";

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
