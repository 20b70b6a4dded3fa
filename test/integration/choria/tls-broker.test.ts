/**
 * The provisioning broker a real fleet uses is TLS-only (go-choria nodes in provisioning mode always
 * dial TLS). The provisioner reaches it from its configuration: `choria_insecure: false` with
 * `tls.ca` (or `tls.insecure_skip_verify`), against a nats-server that requires TLS.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { brokerSettings } from "../../../lib/aws/choria-client";
import { BrokerConnectionError } from "../../../lib/errors";
import { SharedBrokerConnection } from "../../../lib/nats/connection";
import { type BrokerConnectionSettings } from "../../../lib/nats/connection-options";
import { parseConfig } from "../../../lib/config/config";
import { makeCertificateAuthority, startTlsBroker, type CertificateAuthority, type TlsBroker } from "../../../dev/local/real-fleet";

/** Connects as a function's container does: the first use of its shared broker connection. */
const connectBroker = (settings: BrokerConnectionSettings) => new SharedBrokerConnection(settings).get();

let dir: string;
let ca: CertificateAuthority;
let broker: TlsBroker;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "tls-broker-test-"));
  ca = await makeCertificateAuthority(join(dir, "ca"));
  broker = await startTlsBroker(ca, join(dir, "broker"));
});

afterAll(async () => {
  await broker?.nats.stop();
  await rm(dir, { recursive: true, force: true });
});

const settingsFor = (extra: Record<string, unknown>) =>
  brokerSettings(parseConfig({ helper: "/bin/true", token: "t", broker_urls: [broker.url], ...extra }), "tls-test");

async function roundTrip(nc: NatsConnection): Promise<string> {
  const sub = nc.subscribe("tls.check", { max: 1 });
  await nc.flush();
  nc.publish("tls.check", new TextEncoder().encode("over tls"));
  for await (const message of sub) return message.string();
  return "";
}

describe("provisioner connection to a TLS-only broker", () => {
  it("connects with choria_insecure false and the CA in tls.ca", async () => {
    const nc = await connectBroker(await settingsFor({ choria_insecure: false, tls: { ca: ca.certFile } }));
    try {
      expect(await roundTrip(nc)).toBe("over tls");
    } finally {
      await nc.close();
    }
  });

  it("accepts a tls:// broker URL", async () => {
    const nc = await connectBroker(
      await settingsFor({ choria_insecure: false, broker_urls: [broker.url.replace("nats://", "tls://")], tls: { ca: ca.certFile } }),
    );
    await nc.close();
  });

  it("connects without a CA when tls.insecure_skip_verify is set, as a provisioning-mode node does", async () => {
    const nc = await connectBroker(await settingsFor({ choria_insecure: false, tls: { insecure_skip_verify: true } }));
    try {
      expect(await roundTrip(nc)).toBe("over tls");
    } finally {
      await nc.close();
    }
  });

  it("refuses a certificate it cannot verify", async () => {
    await expect(connectBroker(await settingsFor({ choria_insecure: false }))).rejects.toBeInstanceOf(BrokerConnectionError);
  });

  it("fails clearly with choria_insecure true (plain TCP) against a TLS-only broker", async () => {
    await expect(connectBroker(await settingsFor({ choria_insecure: true }))).rejects.toBeInstanceOf(BrokerConnectionError);
  });
});
