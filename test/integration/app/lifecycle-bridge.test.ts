import type { SQSClient } from "@aws-sdk/client-sqs";
import { connect, RetentionPolicy, type NatsConnection } from "nats";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { receive, startServices, type LocalServices, type Queues } from "../../support/aws";
import { startDeployment, type Deployment } from "../handlers/support";

let services: LocalServices;
let sqsApi: SQSClient;
let nc: NatsConnection;
let deployment: Deployment;
let queues: Queues;

const startup = (identity: string, component = "provision_mode_server") =>
  encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component, timestampMs: Date.now() }), "cloudevents");

beforeAll(async () => {
  services = await startServices();
  sqsApi = services.sqsApi;
  const resources = await services.resources(`bridge-${Date.now()}`);
  queues = resources.queues;
  nc = await connect({ servers: services.nats.url });
  deployment = await startDeployment({ deploymentId: "bridge", site: "bridge", natsUrl: services.nats.url, resources });
});

afterAll(async () => {
  await deployment?.app.close();
  await nc?.close();
  await services?.stop();
});

describe("the lifecycle bridge", () => {
  // The bridge forwards only while its deployment leads; a discovery wins (or renews) the lease.
  beforeEach(async () => {
    expect((await deployment.app.discover({ remainingMs: () => 10_000 })).paused).toBe(false);
  });

  it("without a lifecycle stream, forwards startup events heard on core NATS during its window", async () => {
    const run = deployment.app.bridgeLifecycle({ remainingMs: () => 3_500 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    nc.publish(lifecycleSubject("startup", "provision_mode_server"), startup("core1.example.net"));
    nc.publish(lifecycleSubject("startup", "other"), startup("core2.example.net", "other"));
    await nc.flush();

    const result = await run;

    const bodies = (await receive(sqsApi, queues.lifecycle)).map((message) => JSON.parse(message.Body ?? "{}").subject);
    expect(result).toEqual({ mode: "core", forwarded: 1, deadLettered: 0, paused: false });
    expect(bodies).toEqual(["core1.example.net"]);
  });

  it("with a JetStream stream, forwards through a durable consumer and acknowledges only what SQS accepted", async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "CHORIA_LIFECYCLE", subjects: ["choria.lifecycle.event.>"], retention: RetentionPolicy.Limits });
    const js = nc.jetstream();
    await js.publish(lifecycleSubject("startup", "provision_mode_server"), startup("js1.example.net"));
    await js.publish(lifecycleSubject("startup", "provision_mode_server"), startup("js2.example.net"));
    await js.publish(lifecycleSubject("shutdown", "provision_mode_server"), startup("js3.example.net"));

    const first = await deployment.app.bridgeLifecycle({ remainingMs: () => 3_500 });
    const second = await deployment.app.bridgeLifecycle({ remainingMs: () => 3_500 });

    const bodies = (await receive(sqsApi, queues.lifecycle)).map((message) => JSON.parse(message.Body ?? "{}").subject);
    const consumer = await jsm.consumers.info("CHORIA_LIFECYCLE", "provisioner-bridge");
    expect(first).toEqual({ mode: "jetstream", forwarded: 2, deadLettered: 0, paused: false });
    expect(second).toEqual({ mode: "jetstream", forwarded: 0, deadLettered: 0, paused: false });
    expect(bodies.sort()).toEqual(["js1.example.net", "js2.example.net"]);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.config.filter_subject).toBe("choria.lifecycle.event.startup.provision_mode_server");
  });
});
