/** An SQS event as the use cases take it (QueueMessage), and their BatchResult as Lambda's partial batch response. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { BatchResult, QueueMessage } from "../app/use-case-ports";

export function queueMessagesOf(event: SQSEvent): QueueMessage[] {
  return event.Records.map((record) => ({
    id: record.messageId,
    body: record.body,
    receiveCount: Number(record.attributes?.ApproximateReceiveCount ?? 1),
    receiptHandle: record.receiptHandle,
    ...(record.eventSourceARN ? { source: record.eventSourceARN } : {}),
  }));
}

export function batchResponse(result: BatchResult): SQSBatchResponse {
  return { batchItemFailures: result.failedMessageIds.map((itemIdentifier) => ({ itemIdentifier })) };
}
