/**
 * The local stack on a broker, an SQS and a provisioning signer it is given, without counting
 * proxies (what bench/peer.ts does to keep the fleet, the emulators and the proxies' HTTP hop out of
 * the measured process): a fleet started apart on that broker with that signer is provisioned, the
 * queue's spy sees every admission, and stopping the stack leaves the given broker up.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connect } from "nats";
import { ed25519SigningKey, generateEd25519Seed } from "../support/choria-node/keys";
import { startNats, startSqs, type RunningNats, type RunningSqs, type SqsSpy } from "../../dev/local/services";
import { LOCAL_PROVISIONING_TOKEN, startLocalStack, TrafficNotCountedError, type LocalStack } from "../../dev/local/stack";
import { startFleet, type Fleet } from "../../dev/simulator";

const NODES = 20;

describe("local stack on given services", () => {
  let nats: RunningNats;
  let sqs: RunningSqs & { spy: SqsSpy };
  let stack: LocalStack | undefined;
  let fleet: Fleet;

  beforeAll(async () => {
    const signer = ed25519SigningKey(generateEd25519Seed());
    [nats, sqs] = await Promise.all([startNats(), startSqs({ spy: true })]);
    stack = await startLocalStack({
      countingProxies: false,
      nodes: 0,
      nats,
      sqs,
      provisioningSigner: signer,
      fast: true,
      helper: "bash",
      restartDelayMs: 200,
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      waitTimeSeconds: 1,
    });
    fleet = await startFleet({ natsUrl: nats.url, count: NODES, provisioningSigner: signer, token: LOCAL_PROVISIONING_TOKEN, restartDelayMs: 200 });
    stack.start();
    await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).restarts >= 1), 60_000);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
    await fleet?.stop();
    await Promise.all([nats?.stop(), sqs?.stop()]);
  }, 30_000);

  it("provisions a fleet it did not start, on the broker and with the signer it was given", () => {
    expect(stack?.fleet.identities).toEqual([]);
    expect(fleet.identities.filter((identity) => fleet.node(identity).restarts !== 1)).toEqual([]);
    expect(fleet.identities.filter((identity) => fleet.node(identity).inProvisioningMode)).toEqual([]);
  });

  it("uses the given SQS for its queues, whose spy saw every host's work arrive with its admission time", () => {
    const admitted = sqs.spy
      .take()
      .filter((message) => message.status === "published" && message.queueName.endsWith("-host-work"))
      .map((message) => JSON.parse(message.body) as { identity: string; admittedAt: unknown });

    expect(stack?.sqs).toBe(sqs);
    expect(new Set(admitted.map((work) => work.identity))).toEqual(new Set(fleet.identities));
    expect(admitted.every((work) => typeof work.admittedAt === "number")).toBe(true);
  });

  it("without counting proxies, says so when asked for their counts or to cut a deployment off", () => {
    expect(() => stack?.traffic).toThrow(TrafficNotCountedError);
    expect(() => stack?.deployments[0]?.kill()).toThrow(TrafficNotCountedError);
    expect(stack?.deployments[0]?.crashed).toBe(false);
  });

  it("leaves the given broker running when it stops", async () => {
    await stack?.stop();
    stack = undefined;
    const nc = await connect({ servers: nats.url, reconnect: false });
    try {
      await expect(nc.flush()).resolves.toBeUndefined();
    } finally {
      await nc.close();
    }
  });
});
