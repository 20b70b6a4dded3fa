/**
 * What go-choria's broker refuses, read from the broker itself: its answer to the client (NATS
 * `Authorization Violation`, permission violations) and its log line naming the reason. Each case
 * would pass through a plain nats-server, so each test fails if the broker accepted it. Our own
 * connection code (lib/nats/connection.ts) must report the refusal by cause, without the
 * password in its message.
 *
 * One real fleet (protocol v2, no stack): a node with the fleet's provisioning JWT provisions
 * nothing here, it only proves the broker admits a correctly signed node next to the refused one.
 */
import { readFile } from "node:fs/promises";
import { connect } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BrokerConnectionError } from "../../lib/errors";
import { SharedBrokerConnection } from "../../lib/nats/connection";
import { type BrokerConnectionSettings } from "../../lib/nats/connection-options";
import { brokerConnectOptions, provisionerCredentials, waitUntil, LifecycleWatch } from "../../dev/local/real-fleet-stack";
import { startRealFleet, type RealFleet } from "../../dev/local/real-fleet";
import { waitUntilAsync } from "../support/wait";

/** Connects as a function's container does: the first use of its shared broker connection. */
const connectBroker = (settings: BrokerConnectionSettings) => new SharedBrokerConnection(settings).get();

const GOOD = "good1.refusals.real.example.net";
const FOREIGN = "foreign1.refusals.real.example.net";

describe("real Choria broker refusals", () => {
  let fleet: RealFleet;
  let events: LifecycleWatch;
  let caPem: string;
  let provisionerTls: { ca: string; cert: string; key: string };

  beforeAll(async () => {
    fleet = await startRealFleet({ identities: [GOOD], protocolV2: true, start: false });
    caPem = fleet.ca.certPem;
    provisionerTls = {
      ca: caPem,
      cert: await readFile(fleet.provisionerCertificate.certFile, "utf8"),
      key: await readFile(fleet.provisionerCertificate.keyFile, "utf8"),
    };
    events = await LifecycleWatch.on(fleet.provisioningBroker, caPem, provisionerCredentials(fleet));
    await fleet.addNode(FOREIGN, { start: false, provisioningJwt: await fleet.foreignProvisioningJwt() });
    await fleet.startAll();
  });

  afterAll(async () => {
    await events?.close();
    await fleet?.stop();
  });

  /** The broker's log lines that came after `before` characters of it. */
  const brokerLogSince = async (before: number) => (await fleet.provisioningBroker.log()).slice(before);

  it("refuses the provisioner user with a wrong broker password, and our connection says the broker refused it", async () => {
    const before = (await fleet.provisioningBroker.log()).length;
    const wrong = "not-the-broker-password";

    const refused = await connectBroker({
      servers: fleet.provisioningBroker.url,
      provisioningPassword: wrong,
      tls: provisionerTls,
      insecure: false,
      name: "refusals-wrong-password",
    }).then(
      (nc) => nc.close().then(() => undefined),
      (error: unknown) => error,
    );

    expect(refused).toBeInstanceOf(BrokerConnectionError);
    expect((refused as Error).message).toBe(`could not connect to ${fleet.provisioningBroker.url}: AUTHORIZATION_VIOLATION`);
    expect((refused as Error).message).not.toContain(wrong);
    expect(await brokerLogSince(before)).toMatch(/Handling provisioning user connection failed, denying: invalid provisioner password supplied/);
  });

  it("refuses the provisioner user with the right password but no client certificate", async () => {
    const before = (await fleet.provisioningBroker.log()).length;

    const refused = await connectBroker({
      servers: fleet.provisioningBroker.url,
      provisioningPassword: fleet.provisioningPassword,
      tls: { ca: caPem },
      insecure: false,
      name: "refusals-no-certificate",
    }).then(
      (nc) => nc.close().then(() => undefined),
      (error: unknown) => error,
    );

    expect(refused).toBeInstanceOf(BrokerConnectionError);
    expect((refused as Error).message).toContain("AUTHORIZATION_VIOLATION");
    expect(await brokerLogSince(before)).toMatch(/provisioning user is only allowed over verified TLS connections/);
  });

  it("admits the provisioner with the password and its certificate into the provisioning account", async () => {
    const nc = await connectBroker({
      servers: fleet.provisioningBroker.url,
      provisioningPassword: fleet.provisioningPassword,
      tls: provisionerTls,
      insecure: false,
      name: "refusals-provisioner",
    });
    try {
      // The provisioning account: lifecycle events of provisioning-mode nodes reach it.
      await waitUntil(() => (events.identities("startup", "provision_mode_server").has(GOOD) ? undefined : `${GOOD} sent no startup event`), 60_000);
      // The broker's own answer to "who am I".
      const reply = await nc.request("$SYS.REQ.USER.INFO", undefined, { timeout: 5_000 });
      expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ data: { user: "provisioner", account: "provisioning" } });
    } finally {
      await nc.close();
    }
  });

  it("refuses a client with no credentials at all, and our connection says so", async () => {
    const before = (await fleet.provisioningBroker.log()).length;

    const refused = await connectBroker({ servers: fleet.provisioningBroker.url, tls: { ca: caPem }, insecure: false, name: "refusals-anonymous" }).then(
      (nc) => nc.close().then(() => undefined),
      (error: unknown) => error,
    );

    expect(refused).toBeInstanceOf(BrokerConnectionError);
    expect((refused as Error).message).toBe(`could not connect to ${fleet.provisioningBroker.url}: AUTHORIZATION_VIOLATION`);
    expect(await brokerLogSince(before)).toMatch(/Denying connection: verified error: unverified connection without JWT token/);
  });

  it("refuses a node whose provisioning JWT another key signed; the node with the fleet's JWT gets in", async () => {
    await waitUntil(() => (events.identities("startup", "provision_mode_server").has(GOOD) ? undefined : `${GOOD} sent no startup event`), 60_000);
    const foreign = fleet.nodes.get(FOREIGN)!;
    await waitUntilAsync(async () => ((await foreign.log()).includes("Authorization Violation") ? undefined : `${FOREIGN} logged no refusal`), 60_000);
    const log = await fleet.provisioningBroker.log();

    expect(log).toMatch(/Denying connection: verified error: .*unverified error: .*signature is invalid/);
    expect(events.identities("startup", "provision_mode_server").has(FOREIGN)).toBe(false);
  });

  it("limits a provisioning-mode node to the subjects the broker grants it", async () => {
    // Connect exactly as a provisioning-mode node does: unverified TLS, the provisioning JWT as token.
    const node = await connect(await brokerConnectOptions(fleet.provisioningBroker, caPem, { token: fleet.provisioningJwt }, "refusals-hostile-node"));
    const provisioner = await connect(await brokerConnectOptions(fleet.provisioningBroker, caPem, provisionerCredentials(fleet), "refusals-observer"));
    try {
      const violations: string[] = [];
      void (async () => {
        for await (const status of node.status()) {
          const context = (status as { permissionContext?: { operation: string; subject: string } }).permissionContext;
          if (context) violations.push(`${context.operation} ${context.subject}`);
        }
      })();
      const heard = new Map<string, number>();
      const listen = (subject: string) => {
        const subscription = provisioner.subscribe(subject);
        void (async () => {
          for await (const message of subscription) heard.set(message.subject, (heard.get(message.subject) ?? 0) + 1);
        })();
      };
      for (const subject of ["provisioning.reply.>", "provisioning.broadcast.agent.>", "provisioning.node.>", "choria.lifecycle.>", "choria.federation.>"]) listen(subject);
      await provisioner.flush();

      // Reading other nodes' replies and lifecycle events is refused; every node's direct subject is not.
      node.subscribe("provisioning.reply.>");
      node.subscribe("choria.lifecycle.>");
      const overheard: string[] = [];
      const direct = node.subscribe("provisioning.node.>");
      void (async () => {
        for await (const message of direct) overheard.push(message.subject);
      })();
      await node.flush();
      provisioner.publish("provisioning.node.other.refusals.real.example.net", "{}");
      await provisioner.flush();
      // Forging requests to other nodes is refused; replies, registration and lifecycle events are allowed.
      const published = [
        "provisioning.broadcast.agent.discovery",
        "provisioning.node.other.refusals.real.example.net",
        "choria.federation.x.federation",
        "provisioning.reply.forged",
        "choria.lifecycle.event.startup.provision_mode_server",
      ];
      for (const subject of published) node.publish(subject, "{}");
      await node.flush();
      await provisioner.flush();
      await waitUntil(() => (violations.length >= 5 ? undefined : `only ${violations.length} permission violations: ${violations.join("; ")}`), 10_000);

      await waitUntil(() => (overheard.length > 0 ? undefined : "the node heard no request to another node"), 10_000);
      // The provisioner's own request to another node reached the hostile node.
      expect(overheard).toEqual(["provisioning.node.other.refusals.real.example.net"]);
      // Of what the node published, only its reply and its lifecycle event reached the provisioner.
      expect(heard).toEqual(
        new Map([
          ["choria.lifecycle.event.startup.provision_mode_server", 1],
          ["provisioning.reply.forged", 1],
          ["provisioning.node.other.refusals.real.example.net", 1],
        ]),
      );
      expect(violations.sort()).toEqual([
        "publish choria.federation.x.federation",
        "publish provisioning.broadcast.agent.discovery",
        "publish provisioning.node.other.refusals.real.example.net",
        "subscription choria.lifecycle.>",
        "subscription provisioning.reply.>",
      ]);
    } finally {
      await Promise.all([node.close(), provisioner.close()]);
    }
  });
});
