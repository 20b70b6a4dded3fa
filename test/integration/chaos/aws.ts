/**
 * The AWS side of the infrastructure chaos tests: tables and queues on the local emulators, and
 * receiving messages and handing them over as an SQS event, the way the event source mapping does.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient, type Message } from "@aws-sdk/client-sqs";
import type { SQSEvent, SQSRecord } from "aws-lambda";
import { createAdmissionTable } from "../../../lib/admission/dynamodb-admission-store";
import { createLeaseTable } from "../../../lib/lease/dynamodb-lease-store";
import { LOCAL_AWS, type RunningSqs } from "../../../lib/local/services";

export interface Queues {
  hostWork: string;
  hostWorkDlq: string;
  lifecycle: string;
  lifecycleDlq: string;
}

export const sqsClient = (url: string) => new SQSClient({ ...LOCAL_AWS, endpoint: url });
export const dynamoClient = (endpoint: string) => new DynamoDBClient({ ...LOCAL_AWS, endpoint });

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
  const tables = { lease: `${prefix}-lease`, admission: `${prefix}-admission` };
  await Promise.all([createLeaseTable(client, tables.lease), createAdmissionTable(client, tables.admission)]);
  return tables;
}

/** An invocation's remaining time, counting down from `budgetMs` in real time. */
export function remainingTime(budgetMs: number): () => number {
  const started = Date.now();
  return () => budgetMs - (Date.now() - started);
}

/** Receives what is visible now (up to `max`). */
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

function toRecord(message: Message, queueUrl: string): SQSRecord {
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
    messageAttributes: {},
    md5OfBody: message.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${queueUrl.split("/").pop()}`,
    awsRegion: "us-east-1",
  };
}

export function sqsEvent(messages: Message[], queueUrl: string): SQSEvent {
  return { Records: messages.map((message) => toRecord(message, queueUrl)) };
}
