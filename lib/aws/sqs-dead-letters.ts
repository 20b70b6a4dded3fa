/** The host-work DLQ as the operator reads it: receive without consuming, make visible again, delete. */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { DeadLetterMessage, DeadLetterQueue } from "../app/use-case-ports";
import { SqsMessageQueue } from "./sqs-queue";

export class SqsDeadLetterQueue extends SqsMessageQueue implements DeadLetterQueue {
  private readonly sqs: SQSClient;

  constructor(options: { client: SQSClient; url: string }) {
    super(options);
    this.sqs = options.client;
  }

  async receive(max: number, hideSeconds: number): Promise<DeadLetterMessage[]> {
    const { Messages = [] } = await this.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.url,
        MaxNumberOfMessages: Math.min(10, Math.max(1, max)),
        VisibilityTimeout: hideSeconds,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["ApproximateReceiveCount", "SentTimestamp"],
      }),
    );
    return Messages.filter((message) => message.MessageId && message.ReceiptHandle).map((message) => ({
      messageId: message.MessageId as string,
      receiptHandle: message.ReceiptHandle as string,
      body: message.Body ?? "",
      attributes: Object.fromEntries(
        Object.entries(message.MessageAttributes ?? {})
          .filter(([, value]) => value.StringValue !== undefined)
          .map(([name, value]) => [name, value.StringValue as string]),
      ),
      receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 1),
      sentAt: message.Attributes?.SentTimestamp === undefined ? undefined : Number(message.Attributes.SentTimestamp),
    }));
  }

  async unhide(messages: readonly DeadLetterMessage[]): Promise<void> {
    for (let start = 0; start < messages.length; start += 10) {
      const entries = messages.slice(start, start + 10).map((message, index) => ({
        Id: String(index),
        ReceiptHandle: message.receiptHandle,
        VisibilityTimeout: 0,
      }));
      await this.sqs.send(new ChangeMessageVisibilityBatchCommand({ QueueUrl: this.url, Entries: entries }));
    }
  }

  async remove(message: DeadLetterMessage): Promise<void> {
    await this.sqs.send(new DeleteMessageCommand({ QueueUrl: this.url, ReceiptHandle: message.receiptHandle }));
  }
}
