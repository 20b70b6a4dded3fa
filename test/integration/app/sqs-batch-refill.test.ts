/** The provision function's refill against fauxqs: what it takes leaves the queue only when completed. */
import { GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCAL_AWS, startSqs, type RunningSqs } from "../../../dev/local/services";
import { SqsBatchRefill } from "../../../lib/aws/sqs-batch-refill";
import { sqsClient } from "../../support/aws";
import { startDelayProxy } from "../../support/delay-proxy";

const sleep = (ms: number) => new Promise((resolveSleep) => setTimeout(resolveSleep, ms));

async function inQueue(client: SQSClient, queueUrl: string) {
  const counts = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
  );
  return { visible: Number(counts.Attributes?.ApproximateNumberOfMessages), inFlight: Number(counts.Attributes?.ApproximateNumberOfMessagesNotVisible) };
}

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
    if (first) refill.complete(first);
    const removalFailures = await refill.settle();
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
    expect(removalFailures).toEqual([]);
    expect(again).toEqual([]);
    expect(counts.Attributes).toMatchObject({ ApproximateNumberOfMessages: "0", ApproximateNumberOfMessagesNotVisible: "2" });
    expect(openWithTime).toBe(true);
    expect(openAfterWindow).toBe(false);
    expect(refill.open()).toBe(false);
    client.destroy();
  });

  it("removes finished work ten to a request, and the rest when the batch settles", async () => {
    // Arrange: twelve messages taken; ten and then one of them finish, one never does.
    const client = sqsClient(sqs.url);
    const queueUrl = sqs.createQueue("refill-removals", { VisibilityTimeout: "600" });
    const bodies = Array.from({ length: 12 }, (_, index) => `m${index}`);
    for (const entries of [bodies.slice(0, 10), bodies.slice(10)]) {
      await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries.map((body) => ({ Id: body, MessageBody: body })) }));
    }
    const refill = new SqsBatchRefill({ client, queueUrl, remainingMs: () => 200_000, stopBeforeDeadlineMs: 120_000, windowMs: 20_000, monotonic: () => 0 });
    const taken = [...(await refill.take(10)), ...(await refill.take(10))];

    // Act
    for (const message of taken.slice(0, 10)) refill.complete(message);
    // The ten go out without settle(); the request lands or fails within the client's attempts.
    let afterTen = await inQueue(client, queueUrl);
    for (let tries = 0; afterTen.inFlight !== 2 && tries < 150; tries++) {
      await sleep(100);
      afterTen = await inQueue(client, queueUrl);
    }
    refill.complete(taken[10]!);
    const beforeSettle = await inQueue(client, queueUrl);
    const failures = await refill.settle();
    const afterSettle = await inQueue(client, queueUrl);

    // Assert
    expect(taken).toHaveLength(12);
    expect(afterTen).toEqual({ visible: 0, inFlight: 2 });
    expect(beforeSettle).toEqual({ visible: 0, inFlight: 2 });
    expect(failures).toEqual([]);
    expect(afterSettle).toEqual({ visible: 0, inFlight: 1 });
    client.destroy();
  });

  it("gives back, after its short visibility, what a receive handed out when its answer never reached us", async () => {
    // Arrange: the queue hides a received message for 600 s; the refill's receive hides it for 5 s
    // until the take is confirmed. The receive's answer is held past the client's 1 s timeout.
    const queueUrl = sqs.createQueue("refill-lost-receive", { VisibilityTimeout: "600" });
    const direct = sqsClient(sqs.url);
    await direct.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: ["x", "y"].map((body) => ({ Id: body, MessageBody: body })) }));
    const target = new URL(sqs.url);
    const proxy = await startDelayProxy({ host: target.hostname, port: Number(target.port) });
    const impatient = new SQSClient({ ...LOCAL_AWS, endpoint: proxy.endpoint, maxAttempts: 1, requestHandler: { requestTimeout: 1_000, throwOnRequestTimeout: true } });
    const options = { queueUrl, remainingMs: () => 200_000, stopBeforeDeadlineMs: 120_000, windowMs: 20_000, monotonic: () => 0, receiveVisibilitySeconds: 5 };
    const refill = new SqsBatchRefill({ client: impatient, ...options });
    proxy.holdNextAnswer("ReceiveMessage", 6_000);

    // Act
    const lost = await refill.take(10).then(
      () => "answered",
      () => "lost",
    );
    const hidden = await inQueue(direct, queueUrl);
    await sleep(6_000);
    const retaken = await new SqsBatchRefill({ client: direct, ...options }).take(10);

    // Assert
    expect(lost).toBe("lost");
    expect(proxy.held).toBe(1);
    expect(hidden).toEqual({ visible: 0, inFlight: 2 });
    expect(retaken.map((message) => message.body).sort()).toEqual(["x", "y"]);
    impatient.destroy();
    direct.destroy();
    await proxy.close();
  });

  it("holds what it took for the invocation's time left, past its short receive visibility", async () => {
    // Arrange
    const client = sqsClient(sqs.url);
    const queueUrl = sqs.createQueue("refill-held", { VisibilityTimeout: "600" });
    await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: ["p", "q"].map((body) => ({ Id: body, MessageBody: body })) }));
    const refill = new SqsBatchRefill({
      client,
      queueUrl,
      remainingMs: () => 200_000,
      stopBeforeDeadlineMs: 120_000,
      windowMs: 20_000,
      monotonic: () => 0,
      receiveVisibilitySeconds: 1,
    });

    // Act
    const taken = await refill.take(10);
    await sleep(2_500);
    const later = await inQueue(client, queueUrl);

    // Assert
    expect(taken).toHaveLength(2);
    expect(later).toEqual({ visible: 0, inFlight: 2 });
    client.destroy();
  });
});
