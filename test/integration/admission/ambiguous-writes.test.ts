/**
 * A claim that DynamoDB applied but answered after the store client's request timeout: the SDK
 * retries it, the retry fails the claim's condition and returns the item with our own claim. The
 * host must still be provisioned by this delivery, not left behind a claim nobody works on. Real
 * NATS, DynamoDB Local behind a proxy that holds that one answer, fauxqs, the production clients.
 */
import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { deliverOnce, lambdaContext, receive, servicesForSuite, type LocalResources } from "../../support/aws";
import { startDelayProxy, type DelayProxy } from "../../support/delay-proxy";
import { hostAndPort } from "../../support/stall-proxy";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";

/** The admission store's and the queues' clients give up on an answer after 3 s (lib/aws/clients.ts): held longer, a write's answer is lost. */
const STORE_REQUEST_TIMEOUT_MS = 3_000;

const SITE = "ambiguous";
const HOST = "slow-claim.example.net";
/** Part of the claim's UpdateExpression as the DynamoDB store sends it: only a claim sets claimedUntil. */
const CLAIM_MARKER = "#claimedUntil = :claimedUntil";

const services = servicesForSuite();
let proxy: DelayProxy;
let fleet: Fleet;
let deployment: Deployment;
let resources: LocalResources;

beforeAll(async () => {
  resources = await services.resources(`ambiguous-${Date.now()}`);
  proxy = await startDelayProxy(hostAndPort(services.dynamoEndpoint));
  fleet = await startFleet({ natsUrl: services.nats.url, identities: [HOST], token: TOKEN, restartDelayMs: 50 });
  deployment = await startDeployment({
    site: SITE,
    deploymentId: "leader",
    natsUrl: services.nats.url,
    resources: { ...resources, dynamoEndpoint: proxy.endpoint },
  });
});

afterAll(async () => {
  await deployment?.app.close();
  await fleet?.stop();
  await proxy?.close();
});

describe("a claim applied but answered after the client's request timeout", () => {
  it("is taken as this worker's claim: the host is provisioned and its work leaves the queue", async () => {
    const getApp = async () => deployment.app;
    const { admitted } = await discoverHandler(getApp)({}, lambdaContext());
    proxy.holdNextAnswer(CLAIM_MARKER, STORE_REQUEST_TIMEOUT_MS + 1_000);

    const delivery = await deliverOnce(services.sqsApi, resources.queues.hostWork, (event) => provisionHandler(getApp)(event, lambdaContext()));

    const store = new DynamoDbAdmissionStore({ client: services.dynamo, tableName: resources.tables.admission });
    const entry = await store.read({ site: SITE, identity: HOST });
    const { Attributes } = await services.sqsApi.send(
      new GetQueueAttributesCommand({ QueueUrl: resources.queues.hostWork, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }),
    );
    expect(admitted).toBe(1);
    expect(proxy.held).toBe(1);
    expect(delivery).toMatchObject({ received: 1, failed: 0 });
    expect(entry).toMatchObject({ state: "provisioned" });
    expect(entry?.claimToken).toBeUndefined();
    expect(fleet.record.filter((record) => record.identity === HOST && record.outcome === 0).map((record) => record.action)).toEqual(
      expect.arrayContaining(["configure", "restart"]),
    );
    expect(Attributes).toMatchObject({ ApproximateNumberOfMessages: "0", ApproximateNumberOfMessagesNotVisible: "0" });
    expect(await receive(services.sqsApi, resources.queues.hostWork)).toEqual([]);
  });
});
