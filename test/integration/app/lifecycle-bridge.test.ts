/**
 * The lifecycle bridge as a tick runs it (lib/app/ticks.ts): the lifecycle function gets a tick,
 * keeps the lease, and while it leads takes the startup events waiting on the broker and admits
 * them in-process: what lands is host work on the deployment's queue, never a lifecycle queue
 * message. From a JetStream stream a tick takes what waits and returns; on core NATS it listens
 * until just before the next tick.
 */
import { randomUUID } from "node:crypto";
import { connect, RetentionPolicy, type NatsConnection } from "nats";
import { beforeEach, describe, expect, it } from "vitest";
import { startNats } from "../../../dev/local/services";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../../../lib/choria/lifecycle";
import { receive, localAwsForSuite, tickEvent, type Queues } from "../../support/aws";
import { cleanupsAfterEach } from "../../support/suite";
import { startDeployment, type Deployment } from "../../support/handlers";

/** The default `lease.renew_interval`: a tick takes events for at most this, less a second, before the next one. */
const KEEP_INTERVAL_MS = 10_000;

const aws = localAwsForSuite();
const cleanups = cleanupsAfterEach();
let nc: NatsConnection;
let deployment: Deployment;
let queues: Queues;

const startup = (identity: string, component = "provision_mode_server") =>
  encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component, timestampMs: Date.now() }), "cloudevents");

/** The identities of the host work queued on `queueUrl`. */
const admitted = async (queueUrl: string) => (await receive(aws.sqsApi, queueUrl, 100)).map((message) => decodeHostWork(message.Body ?? "").identity).sort();

/** Runs one tick through the lifecycle function with `budgetMs` left to its invocation; returns how long it took. */
async function tick(budgetMs: number): Promise<number> {
  const started = performance.now();
  const response = await deployment.app.handleLifecycleBatch(tickEvent(queues.lifecycle), { remainingMs: () => budgetMs - (performance.now() - started) });
  expect(response.batchItemFailures).toEqual([]);
  return performance.now() - started;
}

describe("the lifecycle bridge, run by a tick", () => {
  // Each test has its own broker (whether it has a lifecycle stream is the test's to say) and
  // deployment. A tick takes events only while its deployment leads; a discovery wins the lease.
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

  it("without a lifecycle stream, admits the startup events heard on core NATS while it listens", async () => {
    const run = tick(3_500);
    await new Promise((resolve) => setTimeout(resolve, 500));
    nc.publish(lifecycleSubject("startup", "provision_mode_server"), startup("core1.example.net"));
    nc.publish(lifecycleSubject("startup", "other"), startup("core2.example.net", "other"));
    await nc.flush();

    await run;

    expect(await admitted(queues.hostWork)).toEqual(["core1.example.net"]);
    expect(await receive(aws.sqsApi, queues.lifecycle)).toEqual([]);
  });

  it("with a JetStream stream, admits what waits for the durable consumer, acknowledges it, and returns once nothing waits", async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: "CHORIA_LIFECYCLE", subjects: ["choria.lifecycle.event.>"], retention: RetentionPolicy.Limits });
    const js = nc.jetstream();
    await js.publish(lifecycleSubject("startup", "provision_mode_server"), startup("js1.example.net"));
    await js.publish(lifecycleSubject("startup", "provision_mode_server"), startup("js2.example.net"));
    await js.publish(lifecycleSubject("shutdown", "provision_mode_server"), startup("js3.example.net"));

    // A whole invocation ahead: the tick may take events until a second before the next tick is due.
    const firstMs = await tick(30_000);
    const afterFirst = await admitted(queues.hostWork);
    const secondMs = await tick(30_000);

    const consumer = await jsm.consumers.info("CHORIA_LIFECYCLE", "provisioner-bridge");
    expect(afterFirst).toEqual(["js1.example.net", "js2.example.net"]);
    expect(await admitted(queues.hostWork)).toEqual([]);
    expect(await receive(aws.sqsApi, queues.lifecycle)).toEqual([]);
    expect(consumer.num_ack_pending).toBe(0);
    expect(consumer.num_pending).toBe(0);
    expect(consumer.config.filter_subject).toBe("choria.lifecycle.event.startup.provision_mode_server");
    // Neither tick listened out its window: each returned once nothing was waiting.
    expect(Math.max(firstMs, secondMs)).toBeLessThan(KEEP_INTERVAL_MS - 1_000);
  });
});
