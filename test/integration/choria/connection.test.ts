import { randomBytes } from "node:crypto";
import type { NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BrokerConnectionError } from "../../../lib/errors";
import { SharedBrokerConnection } from "../../../lib/nats/connection";
import type { BrokerConnectionSettings } from "../../../lib/nats/connection-options";
import { type RunningNats, startNats } from "../../../dev/local/services";
import { rejectionOf } from "../../support/suite";

/** Connects as a function's container does: the first use of its shared broker connection. */
const connectBroker = (settings: BrokerConnectionSettings) => new SharedBrokerConnection(settings).get();

const password = randomBytes(12).toString("hex");
let nats: RunningNats;

beforeAll(async () => {
  nats = await startNats({ args: ["--user", "provisioner", "--pass", password] });
});

afterAll(async () => {
  await nats.stop();
});

const settings = (overrides: Partial<BrokerConnectionSettings> = {}): BrokerConnectionSettings => ({
  servers: nats.url,
  provisioningPassword: password,
  insecure: true,
  name: "provisioner-test",
  connectTimeoutMs: 2_000,
  ...overrides,
});

async function roundTrip(nc: NatsConnection): Promise<string> {
  const subject = `check.${randomBytes(4).toString("hex")}`;
  const sub = nc.subscribe(subject, { max: 1 });
  await nc.flush();
  nc.publish(subject, new TextEncoder().encode("hello"));
  for await (const message of sub) return message.string();
  return "";
}

describe("connectBroker", () => {
  it("authenticates as user provisioner with the provisioning password", async () => {
    const nc = await connectBroker(settings());

    expect(await roundTrip(nc)).toBe("hello");
    await nc.close();
  });

  it("fails with BrokerConnectionError on a wrong password without echoing it", async () => {
    const wrong = "not-the-password-" + randomBytes(4).toString("hex");

    const error = await rejectionOf(connectBroker(settings({ provisioningPassword: wrong })));

    expect(error).toBeInstanceOf(BrokerConnectionError);
    expect(error.message).not.toContain(wrong);
    expect(error.message).toContain(nats.url);
  });

  it("demands TLS unless choria_insecure is set", async () => {
    const error = await rejectionOf(connectBroker(settings({ insecure: false })));

    expect(error).toBeInstanceOf(BrokerConnectionError);
    expect(error.message).not.toContain(password);
  });

  it("accepts a comma-separated server list", async () => {
    const nc = await connectBroker(settings({ servers: ` ${nats.url} , ${nats.url}` }));

    expect(await roundTrip(nc)).toBe("hello");
    await nc.close();
  });
});

describe("SharedBrokerConnection", () => {
  it("reuses one healthy connection across calls", async () => {
    const shared = new SharedBrokerConnection(settings());

    const [first, second] = await Promise.all([shared.get(), shared.get()]);
    const third = await shared.get();

    expect(second).toBe(first);
    expect(third).toBe(first);
    await shared.close();
  });

  it("replaces a closed connection", async () => {
    const shared = new SharedBrokerConnection(settings());
    const first = await shared.get();
    await first.close();

    const second = await shared.get();

    expect(second).not.toBe(first);
    expect(await roundTrip(second)).toBe("hello");
    await shared.close();
  });

  it("hands out a working connection after the broker restarts", async () => {
    const shared = new SharedBrokerConnection(settings(), { healthCheckTimeoutMs: 500 });
    await shared.get();

    await nats.restart();
    const after = await shared.get();

    expect(await roundTrip(after)).toBe("hello");
    await shared.close();
  });
});
