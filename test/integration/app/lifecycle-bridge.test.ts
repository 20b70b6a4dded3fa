import { randomUUID } from "node:crypto";
import { connect, RetentionPolicy, type NatsConnection } from "nats";
import { beforeEach, describe, expect, it } from "vitest";
import { startNats } from "../../../dev/local/services";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { receive, localAwsForSuite, type Queues } from "../../support/aws";
import { cleanupsAfterEach } from "../../support/suite";
import { startDeployment, type Deployment } from "../../support/handlers";

const aws = localAwsForSuite();
const cleanups = cleanupsAfterEach();
let nc: NatsConnection;
let deployment: Deployment;
let queues: Queues;

const startup = (identity: string, component = "provision_mode_server") =>
  encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component, timestampMs: Date.now() }), "cloudevents");

describe("the lifecycle bridge", () => {
  // Each test has its own broker (whether it has a lifecycle stream is the test's to say) and
  // deployment. The bridge forwards only while its deployment leads; a discovery wins the lease.
  beforeEach(async () => {
    const nats = await startNats();
    cleanups.push(() => nats.stop());
    nc = await connect({ servers: nats.url });
    cleanups.push(() => nc.close());
    const resources = await aws.resources(`bridge-${randomUUID().slice(0, 8)}`);
    queues = resources.queues;
    deployment = await startDeployment({ deploymentId: "bridge", site: "bridge", natsUrl: nats.url, resources });
    cleanups.push(() => deployment.app.close());
    expect((await deployment.app.discover({ remainingMs: () => 10_000 })).paused).toBe(false);
  });

  it("without a lifecycle stream, forwards startup events heard on core NATS during its window", async () => {
    const run = deployment.app.bridgeLifecycle({ remainingMs: () => 3_500 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    nc.publish(lifecycleSubject("startup", "provision_mode_server"), startup("core1.example.net"));
    nc.publish(lifecycleSubject("startup", "other"), startup("core2.example.net", "other"));
    await nc.flush();

    const result = await run;

    const bodies = (await receive(aws.sqsApi, queues.lifecycle)).map((message) => JSON.parse(message.Body ?? "{}").subject);
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

    const bodies = (await receive(aws.sqsApi, queues.lifecycle)).map((message) => JSON.parse(message.Body ?? "{}").subject);
    const consumer = await jsm.consumers.info("CHORIA_LIFECYCLE", "provisioner-bridge");
    expect(first).toEqual({ mode: "jetstream", forwarded: 2, deadLettered: 0, paused: false });
    expect(second).toEqual({ mode: "jetstream", forwarded: 0, deadLettered: 0, paused: false });
    expect(bodies.sort()).toEqual(["js1.example.net", "js2.example.net"]);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.config.filter_subject).toBe("choria.lifecycle.event.startup.provision_mode_server");
  });
});
