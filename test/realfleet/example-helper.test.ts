/**
 * The example helper (examples/helpers/provision-helper.mjs) configuring real protocol v2 nodes, with
 * its PROVISION_HELPER_* settings for a real site (target broker, trusted signers, CA). Here the
 * target broker's certificate came from another CA than the one the helper names: a node that
 * verifies its broker must refuse it, log why, and never join it.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { provisionedFleet, provisioningActions, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";

const IDENTITY = "n1.otherca.real.example.net";

describe("real fleet, example helper, target broker certificate from another CA", () => {
  let provisioned: ProvisionedFleet;

  beforeAll(async () => {
    provisioned = await provisionedFleet({
      identities: [IDENTITY],
      protocolV2: true,
      features: ["jwt", "ed25519"],
      helper: "example",
      targetCertificateFromOtherCa: true,
      dynamoDbEndpoint: inject("dynamoEndpoint"),
    });
    await provisioned.fleet.startAll();
    provisioned.stack.start();
    const node = provisioned.fleet.nodes.get(IDENTITY)!;
    await waitUntil(() => (provisioned.provisioningEvents.identities("provisioned", "provision_mode_server").has(IDENTITY) ? undefined : `${IDENTITY} was not provisioned`), 180_000);
    // The restarted node dials the target broker; wait for its own account of the TLS handshake.
    const deadline = Date.now() + 60_000;
    while (!/certificate signed by unknown authority/.test(await node.log()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
  });

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("configures the node to verify the target broker against the CA it was given", async () => {
    const node = provisioned.fleet.nodes.get(IDENTITY)!;
    expect(await node.config()).toMatchObject({
      "plugin.choria.middleware_hosts": provisioned.fleet.targetBroker.hostPort,
      "plugin.security.provider": "choria",
      "plugin.security.choria.ca": provisioned.fleet.ca.certFile,
      "plugin.security.choria.trusted_signers": provisioned.serverJwtSigner,
      rpcauthprovider: "aaasvc",
    });
    expect(await provisioningActions(node)).toEqual({ configured: 1, restarted: 1 });
  });

  it("refuses the target broker's certificate and never joins it", async () => {
    const node = provisioned.fleet.nodes.get(IDENTITY)!;
    expect(await node.log()).toMatch(/x509: certificate signed by unknown authority/);
    expect(node.running).toBe(true);
    expect(provisioned.targetEvents.identities("startup").has(IDENTITY)).toBe(false);
    // The broker saw the handshake end from the node's side.
    expect(await provisioned.fleet.targetBroker.log()).toMatch(/TLS handshake error: remote error: tls: (bad|unknown) certificate/);
  });
});
