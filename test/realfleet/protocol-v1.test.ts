/**
 * A protocol v1 fleet (provisioning JWT made with `jwt prov`, insecure provisioning) of real
 * go-choria servers, provisioned with the jwt and pki features through go-choria's broker: each
 * node's CSR is signed by the helper's CA and the node joins the target broker with the file
 * security provider, which verifies the broker's certificate against that CA and presents the
 * node's certificate (mTLS). The site's admin client (a certificate from the same CA) then pings
 * every node and runs `rpcutil inventory` on it.
 */
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { provisionedFleet, provisioningActions, waitForArrivals, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { retriedOnPortClash } from "../support/port-clash";
import { NODE_CONNECT_BOUND_MS, provisionBoundMs, termBoundMs } from "../support/real-fleet-bounds";
import { adminReachesEveryNode } from "./admin";

const run = promisify(execFile);
// The last node's provisioning.jwt ends in a newline, as a file written by config management does;
// the node sends it byte for byte in its `jwt` reply and as its NATS token.
const NEWLINE_JWT = "nl1.v1.real.example.net";
const IDENTITIES = ["n1.v1.real.example.net", "n2.v1.real.example.net", "n3.v1.real.example.net", NEWLINE_JWT];
/** Time for setting up the fleet and the stack (CA, certificates, two brokers ready within 30 s each, tables, queues). */
const SETUP_ALLOWANCE_MS = 120_000;
/** The hook's own limit; it only backs the protocol bound of the wait inside it (checked below). */
const SETUP_HOOK_MS = 15 * 60_000;

describe("real fleet, protocol v1 with jwt + pki", () => {
  let provisioned: ProvisionedFleet;

  beforeAll(async () => {
    // Its brokers bind ports picked moments before: another run beside this one may take one first.
    provisioned = await retriedOnPortClash(() =>
      provisionedFleet({
        identities: IDENTITIES.filter((identity) => identity !== NEWLINE_JWT),
        protocolV2: false,
        features: ["jwt", "pki"],
        dynamoDbEndpoint: inject("dynamoEndpoint"),
      }),
    );
    const timings = provisioned.stack.timings;
    // A node still starting when a discovery went out (a loaded machine) is found by the next one.
    const toArrive = NODE_CONNECT_BOUND_MS + termBoundMs(timings) + timings.discoverRateMs + provisionBoundMs(timings);
    expect(SETUP_ALLOWANCE_MS + toArrive).toBeLessThan(SETUP_HOOK_MS);
    await provisioned.fleet.addNode(NEWLINE_JWT, { start: false, jwtFileSuffix: "\n" });
    await provisioned.fleet.startAll();
    provisioned.stack.start();
    await waitForArrivals(provisioned, IDENTITIES, toArrive);
  }, SETUP_HOOK_MS);

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("writes the helper's configuration to each node's server.conf", async () => {
    for (const identity of IDENTITIES) {
      const node = provisioned.fleet.nodes.get(identity)!;
      const ssl = join(node.configDir, "ssl");
      expect(await node.config()).toEqual({
        identity,
        loglevel: "info",
        collectives: "mcollective",
        "plugin.choria.server.provision": "false",
        "plugin.choria.middleware_hosts": provisioned.fleet.targetBroker.hostPort,
        "plugin.security.provider": "file",
        "plugin.security.file.certificate": join(ssl, "certificate.pem"),
        "plugin.security.file.key": join(ssl, "private.pem"),
        "plugin.security.file.ca": join(ssl, "ca.pem"),
      });
    }
  });

  it("gives each node a certificate for its identity, signed by the CA, next to the key it generated", async () => {
    for (const identity of IDENTITIES) {
      const ssl = join(provisioned.fleet.nodes.get(identity)!.configDir, "ssl");
      const verified = await run("openssl", ["verify", "-CAfile", provisioned.fleet.ca.certFile, join(ssl, "certificate.pem")]);
      expect(verified.stdout).toContain(": OK");
      const subject = await run("openssl", ["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in", join(ssl, "certificate.pem")]);
      expect(subject.stdout.trim()).toBe(`subject=CN=${identity}`);
      expect(await readFile(join(ssl, "ca.pem"), "utf8")).toBe(provisioned.fleet.ca.certPem);
      const certKey = await run("openssl", ["x509", "-noout", "-pubkey", "-in", join(ssl, "certificate.pem")]);
      const privateKey = await run("openssl", ["pkey", "-pubout", "-in", join(ssl, "private.pem")]);
      expect(certKey.stdout).toBe(privateKey.stdout);
    }
  });

  it("configures and restarts each node exactly once; all leave provisioning mode and join the target broker", async () => {
    for (const identity of IDENTITIES) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: 1, restarted: 1 });
      expect(node.running).toBe(true);
    }
    const arrivals = provisioned.targetEvents.of("startup");
    expect(arrivals.map((event) => [event.identity, event.component]).sort()).toEqual(IDENTITIES.map((identity) => [identity, "server"]).sort());
  });

  it("lets the site's admin client ping every node and run rpcutil inventory on it", async () => {
    await adminReachesEveryNode(provisioned, IDENTITIES);
  });

  it("reset deletes what a node wrote, so it starts in provisioning mode again", async () => {
    const node = provisioned.fleet.nodes.get(IDENTITIES[0]!)!;
    const startups = () => provisioned.provisioningEvents.of("startup", "provision_mode_server").filter((event) => event.identity === node.identity).length;
    const before = startups();

    await node.reset();
    expect(node.running).toBe(false);
    expect(await readdir(node.configDir)).toEqual([]);
    expect(await node.log()).toBe("");
    await node.start();

    await waitUntil(() => (startups() > before ? undefined : `${node.identity} sent no provisioning-mode startup event`), NODE_CONNECT_BOUND_MS);
    expect(await node.log()).toContain("Setting build defaults to those found in");
  });
});
