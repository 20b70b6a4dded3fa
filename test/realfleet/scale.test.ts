/**
 * Fifty real go-choria servers in one run, each in its own UTS and mount namespace: 25 protocol v1
 * nodes (jwt + pki, the real-fleet helper signs their CSRs) and 25 protocol v2 nodes (jwt + ed25519,
 * configured by the example helper with a real site's settings), each fleet on its own pair of
 * go-choria brokers. Every node must leave provisioning mode, join the target broker and be usable
 * by the site's admin client there. The time to all provisioned and the memory the nodes and brokers
 * hold are printed as `real-fleet scale figures` (reports/realfleet.md).
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import { fleetMemory } from "../../dev/local/real-fleet";
import { provisionedFleet, provisioningActions, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { adminReachesEveryNode } from "./admin";

const PER_VERSION = 25;
const MIB = 1024 * 1024;

describe("real fleet at scale: 50 servers, both protocol versions", () => {
  let provisioned: ProvisionedFleet | undefined;

  afterEach(async () => {
    await provisioned?.stop();
    provisioned = undefined;
  });

  it.each([
    { version: 1, features: ["jwt", "pki"] as const, helper: "realfleet" as const },
    { version: 2, features: ["jwt", "ed25519"] as const, helper: "example" as const },
  ])("provisions $version: 25 v$version nodes and the admin reaches all of them", async ({ version, features, helper }) => {
    const identities = Array.from({ length: PER_VERSION }, (_, index) => `n${index + 1}.scale-v${version}.real.example.net`);
    provisioned = await provisionedFleet({
      identities,
      protocolV2: version === 2,
      features: [...features],
      helper,
      dynamoDbEndpoint: inject("dynamoEndpoint"),
    });
    await provisioned.fleet.startAll();
    const started = Date.now();
    provisioned.stack.start();
    await waitForArrivals(provisioned, identities, 280_000);
    const seconds = (Date.now() - started) / 1000;
    const memory = await fleetMemory(provisioned.fleet);

    for (const identity of identities) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: 1, restarted: 1 });
      expect((await node.config())?.["plugin.choria.server.provision"]).toBe("false");
    }
    await adminReachesEveryNode(provisioned, identities);

    process.stdout.write(
      `real-fleet scale figures: ${JSON.stringify({
        protocol: version,
        nodes: PER_VERSION,
        secondsToAllProvisioned: Math.round(seconds * 10) / 10,
        nodesPssMiB: Math.round(memory.nodes.pssBytes / MIB),
        nodesRssMiB: Math.round(memory.nodes.rssBytes / MIB),
        perNodePssMiB: Math.round((memory.perNode.pssBytes / MIB) * 10) / 10,
        brokersPssMiB: Math.round(memory.brokers.pssBytes / MIB),
      })}\n`,
    );
  });
});
