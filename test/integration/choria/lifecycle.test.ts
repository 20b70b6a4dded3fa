import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishStartupEvent } from "../../../lib/nats/connection";
import { buildLifecycleEvent, encodeLifecycleEvent, type LifecycleEvent, lifecycleSubject, parseLifecycleEvent } from "../../../lib/choria/lifecycle";
import { type RunningNats, startNats } from "../../../dev/local/services";

let nats: RunningNats;
let publisher: NatsConnection;
let listener: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  [publisher, listener] = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })]);
});

afterAll(async () => {
  await Promise.all([publisher.close(), listener.close()]);
  await nats.stop();
});

function collect(subject: string, count: number): Promise<Uint8Array[]> {
  return new Promise((resolve) => {
    const received: Uint8Array[] = [];
    listener.subscribe(subject, {
      max: count,
      callback: (_error, message) => {
        received.push(message.data);
        if (received.length === count) resolve(received);
      },
    });
  });
}

describe("lifecycle events over NATS", () => {
  it("delivers a node's startup event in both formats to the provisioner's subscription", async () => {
    const subject = lifecycleSubject("startup", "provision_mode_server");
    const arrived = collect(subject, 2);
    await listener.flush();
    const event = buildLifecycleEvent({ type: "startup", identity: "n1.example.net", component: "provision_mode_server", version: "0.30.0", timestampMs: Date.now() });

    publisher.publish(subject, encodeLifecycleEvent(event, "cloudevents"));
    publisher.publish(subject, encodeLifecycleEvent(event, "choria"));
    const parsed = (await arrived).map((bytes) => parseLifecycleEvent(bytes));

    expect(parsed).toEqual<LifecycleEvent[]>([event, event]);
  });

  it("publishes the provisioner's own startup event in Choria format", async () => {
    const arrived = collect("choria.lifecycle.event.startup.provisioner", 1);
    await listener.flush();

    await publishStartupEvent(publisher, { identity: "provisioner.test.local", version: "1.0.0", timestampMs: 1_700_000_000_000 });
    const [bytes] = await arrived;

    const text = new TextDecoder().decode(bytes);
    expect(text.startsWith('{"protocol":"io.choria.lifecycle.v1.startup",')).toBe(true);
    expect(parseLifecycleEvent(bytes!)).toMatchObject({
      type: "startup",
      identity: "provisioner.test.local",
      component: "provisioner",
      version: "1.0.0",
      timestamp: 1_700_000_000,
    });
  });
});
