/**
 * The admission store's and the queues' clients against a path that stalls (TCP open, no bytes):
 * each call must fail within the bound its client settings promise, well inside an invocation,
 * not after the SDK's default retries of a long request timeout. Real DynamoDB Local and fauxqs
 * behind a frozen stall proxy, the production client factories.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { AdmissionStoreError } from "../../../lib/ports/admission-store";
import { createSqsClient, createStoreClient, endpointConfig, STORE_CLIENT_FAILS_WITHIN_MS } from "../../../lib/aws/clients";
import { SqsMessageQueue } from "../../../lib/aws/sqs-queue";
import { silentLogger } from "../../../lib/ports/logger";
import { RecordingMetrics } from "../../support/fakes";
import { localAwsForSuite, type LocalResources } from "../../support/aws";
import { hostAndPort, startStallProxy, type StallProxy } from "../../support/stall-proxy";

/** Timers firing late on a loaded machine (the old settings took 15-45 s); the bounds themselves come from the client settings. */
const SCHEDULING_SLACK_MS = 5_000;

const aws = localAwsForSuite();
let resources: LocalResources;
let dynamoPath: StallProxy;
let sqsPath: StallProxy;

beforeAll(async () => {
  resources = await aws.resources(`stalled-${Date.now()}`);
  dynamoPath = await startStallProxy(hostAndPort(aws.dynamoEndpoint));
  sqsPath = await startStallProxy(hostAndPort(resources.sqsUrl));
});

afterAll(async () => {
  await dynamoPath?.close();
  await sqsPath?.close();
});

async function timeToFail(call: () => Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const started = performance.now();
  const error = await call().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  return { ms: performance.now() - started, error };
}

describe("store clients on a stalled path", () => {
  it("an admission (a write, then the read that settles it) fails with a named error within the store client's bound", async () => {
    const client = createStoreClient(endpointConfig("us-east-1", `http://${dynamoPath.address}`));
    const store = new DynamoDbAdmissionStore({ client, tableName: resources.tables.admission });
    const registry = new AdmissionRegistry({ site: "stalled", intervalMs: 60_000 }, { store, metrics: new RecordingMetrics() });
    // One answered call first, so the client holds an open connection when the path stalls.
    await store.read({ site: "stalled", identity: "warm" });
    dynamoPath.freeze();

    const { ms, error } = await timeToFail(() => registry.admit("node-1", "discovery", 1));

    dynamoPath.thaw();
    client.destroy();
    expect(error).toBeInstanceOf(AdmissionStoreError);
    expect(ms).toBeLessThan(2 * STORE_CLIENT_FAILS_WITHIN_MS + SCHEDULING_SLACK_MS);
  });

  it("a batch of host work that cannot be queued is reported not sent within the queue client's bound", async () => {
    const client = createSqsClient(endpointConfig("us-east-1", `http://${sqsPath.address}`));
    const queue = new SqsMessageQueue({ client, url: resources.queues.hostWork.replace(new URL(resources.sqsUrl).host, sqsPath.address), logger: silentLogger });
    await queue.counts();
    sqsPath.freeze();

    const started = performance.now();
    const accepted = await queue.sendAll([{ body: "one" }, { body: "two" }]);
    const ms = performance.now() - started;

    sqsPath.thaw();
    client.destroy();
    expect(accepted).toEqual([false, false]);
    expect(ms).toBeLessThan(STORE_CLIENT_FAILS_WITHIN_MS + SCHEDULING_SLACK_MS);
  });

  it("a queue send fails within the queue client's bound", async () => {
    const client = createSqsClient(endpointConfig("us-east-1", `http://${sqsPath.address}`));
    const queue = new SqsMessageQueue({ client, url: resources.queues.hostWork.replace(new URL(resources.sqsUrl).host, sqsPath.address), logger: silentLogger });
    await queue.counts();
    sqsPath.freeze();

    const { ms, error } = await timeToFail(() => queue.send({ body: "stalled" }));

    sqsPath.thaw();
    client.destroy();
    expect(error).toBeInstanceOf(Error);
    expect(ms).toBeLessThan(STORE_CLIENT_FAILS_WITHIN_MS + SCHEDULING_SLACK_MS);
  });
});
