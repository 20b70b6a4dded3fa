/**
 * The local stack on a broker, an SQS and a provisioning signer it is given (what bench/peer.ts
 * does to keep the fleet and the emulators out of the measured process): a fleet started apart on
 * that broker with that signer is provisioned, and stopping the stack leaves the given broker up.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connect } from "nats";
import { ed25519SigningKey, generateEd25519Seed } from "../../lib/crypto";
import { startNats, startSqs, type RunningNats, type RunningSqs } from "../../dev/local/services";
import { LOCAL_PROVISIONING_TOKEN, startLocalStack, type LocalStack } from "../../dev/local/stack";
import { startFleet, type Fleet } from "../../dev/simulator";

const NODES = 20;

describe("local stack on given services", () => {
  let nats: RunningNats;
  let sqs: RunningSqs;
  let stack: LocalStack | undefined;
  let fleet: Fleet;

  beforeAll(async () => {
    const signer = ed25519SigningKey(generateEd25519Seed());
    [nats, sqs] = await Promise.all([startNats(), startSqs()]);
    stack = await startLocalStack({
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

  it("uses the given SQS for its queues", () => {
    expect(stack?.sqs).toBe(sqs);
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
