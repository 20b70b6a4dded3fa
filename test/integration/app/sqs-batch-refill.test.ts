/** The provision function's refill against fauxqs: what it takes leaves the queue only when completed. */
import { GetQueueAttributesCommand, SendMessageBatchCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSqs, type RunningSqs } from "../../../dev/local/services";
import { SqsBatchRefill } from "../../../lib/aws/sqs-batch-refill";
import { sqsClient } from "../../support/aws";

describe("SqsBatchRefill", () => {
  let sqs: RunningSqs;
  beforeAll(async () => {
    sqs = await startSqs();
  });
  afterAll(async () => {
    await sqs.stop();
  });

  it("takes ready work without waiting; a completed message is gone while an uncompleted one stays in flight; it closes near the deadline or after its window", async () => {
    // Arrange
    const client = sqsClient(sqs.url);
    const queueUrl = sqs.createQueue("refill-host-work", { VisibilityTimeout: "60" });
    await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: ["a", "b", "c"].map((body) => ({ Id: body, MessageBody: body })) }));
    let remaining = 200_000;
    let now = 5_000;
    const refill = new SqsBatchRefill({ client, queueUrl, remainingMs: () => remaining, stopBeforeDeadlineMs: 120_000, windowMs: 20_000, monotonic: () => now });

    // Act
    const taken = await refill.take(10);
    const [first] = taken;
    if (first) await refill.complete(first);
    const again = await refill.take(10);
    const counts = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
    );
    const openWithTime = refill.open();
    now = 25_000;
    const openAfterWindow = refill.open();
    now = 10_000;
    remaining = 119_000;

    // Assert
    expect(taken.map((message) => message.body).sort()).toEqual(["a", "b", "c"]);
    expect(taken.every((message) => message.receiveCount === 1 && message.receiptHandle !== "")).toBe(true);
    expect(again).toEqual([]);
    expect(counts.Attributes).toMatchObject({ ApproximateNumberOfMessages: "0", ApproximateNumberOfMessagesNotVisible: "2" });
    expect(openWithTime).toBe(true);
    expect(openAfterWindow).toBe(false);
    expect(refill.open()).toBe(false);
    client.destroy();
  });
});
