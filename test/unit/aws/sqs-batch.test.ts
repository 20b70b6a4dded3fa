import { describe, expect, it } from "vitest";
import { sqsEventFromBodies } from "../../../dev/local/sqs-event";
import { batchResponse, queueMessagesOf } from "../../../lib/aws/sqs-batch";

describe("SQS events as the use cases take them", () => {
  it("maps each record to a QueueMessage with its receive count and source queue", () => {
    // Arrange
    const arn = "arn:aws:sqs:us-east-1:000000000000:host-work";
    const event = sqsEventFromBodies(["one", "two"], arn, 1_700_000_000_000);
    event.Records[1]!.attributes.ApproximateReceiveCount = "4";

    // Act
    const messages = queueMessagesOf(event);

    // Assert
    const [first, second] = event.Records;
    expect(messages).toEqual([
      { id: first!.messageId, body: "one", receiveCount: 1, receiptHandle: first!.receiptHandle, source: arn },
      { id: second!.messageId, body: "two", receiveCount: 4, receiptHandle: second!.receiptHandle, source: arn },
    ]);
  });

  it("reports the messages to retry as Lambda's batch item failures", () => {
    // Act
    const response = batchResponse({ failedMessageIds: ["m-1", "m-3"] });

    // Assert
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: "m-1" }, { itemIdentifier: "m-3" }] });
  });
});
