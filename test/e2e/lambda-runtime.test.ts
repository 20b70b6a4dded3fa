/**
 * The emulated SQS event source mapping against real fauxqs: ReportBatchItemFailures deletes only
 * the successes, failures come back after their visibility timeout and reach the DLQ through the
 * queue's RedrivePolicy, a throwing handler or a malformed report fails the whole batch, and a
 * killed source's running invocation sees no time left.
 */
import { GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { InvocationLedger, SqsEventSource, type SqsHandler } from "../../dev/local/lambda-runtime";
import { LOCAL_AWS, startSqs, type RunningSqs } from "../../dev/local/services";

describe("SqsEventSource", () => {
  let sqs: RunningSqs;
  let client: SQSClient;
  const sources: SqsEventSource[] = [];
  let queueNumber = 0;

  beforeAll(async () => {
    sqs = await startSqs();
    client = new SQSClient({ ...LOCAL_AWS, endpoint: sqs.url });
  });
  afterEach(async () => {
    await Promise.all(sources.splice(0).map((source) => source.stop(1_000)));
  });
  afterAll(async () => {
    client?.destroy();
    await sqs?.stop();
  });

  function queues(maxReceiveCount: number) {
    const name = `runtime-${++queueNumber}`;
    const dlq = sqs.createQueueWithArn(`${name}-dlq`);
    const queue = sqs.createQueueWithArn(name, {
      VisibilityTimeout: "1",
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount }),
    });
    return { queue, dlq };
  }

  async function send(url: string, bodies: string[]) {
    await client.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: bodies.map((body, index) => ({ Id: String(index), MessageBody: body })) }));
  }

  async function depth(url: string): Promise<number> {
    const reply = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
    );
    return Number(reply.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(reply.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
  }

  async function until(condition: () => boolean | Promise<boolean>, what: string) {
    for (let i = 0; i < 300; i++) {
      if (await condition()) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`not reached: ${what}`);
  }

  function start(queue: { url: string; arn: string }, handler: SqsHandler, ledger = new InvocationLedger()) {
    const source = new SqsEventSource({
      sqs: client,
      queueUrl: queue.url,
      queueArn: queue.arn,
      function: { name: "test-function", timeoutMs: 5_000, memoryMb: 128 },
      handler,
      ledger,
      batchSize: 10,
      maxConcurrency: 1,
      waitTimeSeconds: 1,
    });
    sources.push(source);
    source.start();
    return { source, ledger };
  }

  it("deletes reported successes, redelivers failures and dead-letters them after maxReceiveCount", async () => {
    const { queue, dlq } = queues(2);
    const deliveries = new Map<string, number[]>();
    const seen: SQSEvent[] = [];
    await send(queue.url, ["ok-1", "fail-1", "ok-2"]);

    start(queue, async (event): Promise<SQSBatchResponse> => {
      seen.push(event);
      for (const record of event.Records) {
        deliveries.set(record.body, [...(deliveries.get(record.body) ?? []), Number(record.attributes.ApproximateReceiveCount)]);
      }
      return { batchItemFailures: event.Records.filter((r) => r.body.startsWith("fail")).map((r) => ({ itemIdentifier: r.messageId })) };
    });
    await until(async () => (await depth(dlq.url)) === 1, "the failing message in the DLQ");

    expect(deliveries.get("ok-1")).toEqual([1]);
    expect(deliveries.get("ok-2")).toEqual([1]);
    expect(deliveries.get("fail-1")).toEqual([1, 2]);
    expect(await depth(queue.url)).toBe(0);
    expect(seen[0]?.Records[0]).toMatchObject({ eventSource: "aws:sqs", eventSourceARN: queue.arn, awsRegion: LOCAL_AWS.region });
  });

  it("retries the whole batch when the handler throws or reports an identifier not in the batch", async () => {
    const { queue, dlq } = queues(2);
    const calls: string[][] = [];
    await send(queue.url, ["a", "b"]);

    start(queue, async (event) => {
      calls.push(event.Records.map((record) => record.body).sort());
      if (calls.length === 1) throw new Error("handler failed");
      return { batchItemFailures: [{ itemIdentifier: "not-in-this-batch" }] };
    });
    await until(async () => (await depth(dlq.url)) === 2, "both messages in the DLQ");

    expect(calls.flat().filter((body) => body === "a")).toHaveLength(2);
    expect(calls.flat().filter((body) => body === "b")).toHaveLength(2);
    expect(await depth(queue.url)).toBe(0);
  });

  it("counts invocations and gives a killed invocation no time left", async () => {
    const { queue } = queues(5);
    const remaining: number[] = [];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    await send(queue.url, ["slow"]);

    const { source, ledger } = start(queue, async (_event, context) => {
      remaining.push(context.getRemainingTimeInMillis());
      await released;
      remaining.push(context.getRemainingTimeInMillis());
    });
    await until(() => remaining.length === 1, "the invocation started");
    source.kill();
    release();
    await source.stop(2_000);

    expect(remaining[0]).toBeGreaterThan(0);
    expect(remaining[1]).toBe(0);
    expect(ledger.count("test-function")).toBe(1);
  });
});
