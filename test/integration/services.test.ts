import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { connect } from "nats";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LOCAL_AWS, startNats, startSqs, type RunningNats, type RunningSqs } from "../../dev/local/services";

describe("local service harness", () => {
  let nats: RunningNats;
  let sqs: RunningSqs;

  beforeAll(async () => {
    nats = await startNats();
    sqs = await startSqs();
  });
  afterAll(async () => {
    await nats?.stop();
    await sqs?.stop();
  });

  it("starts a nats-server with JetStream on a random loopback port", async () => {
    const connection = await connect({ servers: nats.url });
    const info = await (await connection.jetstreamManager()).getAccountInfo();
    await connection.close();

    expect(nats.port).toBeGreaterThan(0);
    expect(info.limits).toBeDefined();
  });

  it("shares one DynamoDB Local across the run", async () => {
    const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });

    const tables = await client.send(new ListTablesCommand({}));

    expect(Array.isArray(tables.TableNames)).toBe(true);
  });

  it("serves SQS through fauxqs", async () => {
    const client = new SQSClient({ ...LOCAL_AWS, endpoint: sqs.url });

    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: "harness", Attributes: { VisibilityTimeout: "17" } }));
    const attributes = await client.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["VisibilityTimeout"] }));

    expect(attributes.Attributes?.VisibilityTimeout).toBe("17");
  });
});
