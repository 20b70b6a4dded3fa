/**
 * A protocol v2 fleet (provisioning JWT made with `jwt prov --protocol-v2`) of real go-choria
 * servers, provisioned with the jwt and ed25519 features through go-choria's broker: every node
 * gets a server JWT signed by the site signer, restarts out of provisioning mode and joins the
 * target broker with it, where the site's admin client (a client JWT allowed `rpcutil.*`) pings it
 * and runs `rpcutil inventory` on it. A node started after the first discovery arrives through its
 * startup event, which the bridge reads from Choria Streams: go-choria's CHORIA_EVENTS stream in
 * the choria account, through the site's durable consumer (dev/local/real-fleet-stack.ts).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { EXTRA_METRIC, METRIC } from "../../lib/ports/metric-names";
import { provisionedFleet, provisioningActions, verifyServerJwt, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { retriedOnPortClash } from "../support/port-clash";
import { eventAdmissionBoundMs, NODE_CONNECT_BOUND_MS, provisionBoundMs, termBoundMs, waitInProvisioningMode } from "../support/real-fleet-bounds";
import { adminReachesEveryNode } from "./admin";

const IDENTITIES = ["n1.v2.real.example.net", "n2.v2.real.example.net", "n3.v2.real.example.net"];
const LATE = "late1.v2.real.example.net";
const SERVER_JWT_EXPIRY = Math.floor(Date.now() / 1000) + 3 * 24 * 3600;
/** Time for setting up the fleet and the stack (CA, certificates, two brokers ready within 30 s each, tables, queues). */
const SETUP_ALLOWANCE_MS = 120_000;
/** The hook's own limit; it only backs the protocol bounds of the waits inside it (checked below). */
const SETUP_HOOK_MS = 25 * 60_000;

describe("real fleet, protocol v2 with jwt + ed25519", () => {
  let provisioned: ProvisionedFleet;

  beforeAll(async () => {
    // Its brokers bind ports picked moments before: another run beside this one may take one first.
    provisioned = await retriedOnPortClash(() =>
      provisionedFleet({
        identities: IDENTITIES,
        protocolV2: true,
        features: ["jwt", "ed25519"],
        dynamoDbEndpoint: inject("dynamoEndpoint"),
        serverClaims: { ou: "choria", collectives: ["mcollective", "realfleet"], exp: SERVER_JWT_EXPIRY },
        stack: {
          timings: {
            // Discovery only when a term is won: a node started later can only arrive through its startup event.
            discoverRateMs: 3_600_000,
          },
        },
      }),
    );
    const timings = provisioned.stack.timings;
    const toArrive = termBoundMs(timings) + provisionBoundMs(timings);
    const lateToArrive = NODE_CONNECT_BOUND_MS + eventAdmissionBoundMs(timings) + provisionBoundMs(timings);
    expect(SETUP_ALLOWANCE_MS + NODE_CONNECT_BOUND_MS + toArrive + lateToArrive).toBeLessThan(SETUP_HOOK_MS);

    await provisioned.fleet.startAll();
    // Only the first term's discovery looks for nodes (and a bridge subscribes up to 2 s into the
    // term): a node still starting then, as on a loaded machine, would be stranded for the hour.
    await waitInProvisioningMode(provisioned, IDENTITIES);
    provisioned.stack.start();
    await waitForArrivals(provisioned, IDENTITIES, toArrive);
    await provisioned.fleet.addNode(LATE);
    await waitForArrivals(provisioned, [...IDENTITIES, LATE], lateToArrive);
  }, SETUP_HOOK_MS);

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("writes the helper's configuration to each node's server.conf", async () => {
    for (const identity of [...IDENTITIES, LATE]) {
      const node = provisioned.fleet.nodes.get(identity)!;
      const config = await node.config();
      expect(config).toMatchObject({
        identity,
        collectives: "mcollective",
        "plugin.choria.server.provision": "false",
        "plugin.choria.middleware_hosts": provisioned.fleet.targetBroker.hostPort,
        "plugin.security.provider": "choria",
        "plugin.security.choria.token_file": join(node.configDir, "server.jwt"),
        "plugin.security.choria.seed_file": join(node.configDir, "server.seed"),
        "plugin.security.choria.trusted_signers": provisioned.serverJwtSigner,
        "plugin.security.choria.ca": provisioned.fleet.ca.certFile,
        rpcauthprovider: "aaasvc",
      });
    }
  });

  it("gives each node a server JWT signed by our key with the helper's collectives, org and expiry", async () => {
    for (const identity of [...IDENTITIES, LATE]) {
      const node = provisioned.fleet.nodes.get(identity)!;
      const claims = verifyServerJwt(await readFile(join(node.configDir, "server.jwt"), "utf8"), provisioned.serverJwtSigner);
      expect(claims).toMatchObject({ identity, collectives: ["mcollective", "realfleet"], ou: "choria" });
      // The helper's absolute exp becomes a validity from now, added to the whole-second iat: as in
      // Go (tokens.newStandardClaims), the token may end up to one second short of it.
      expect(SERVER_JWT_EXPIRY - (claims.exp as number)).toBeOneOf([0, 1]);
      expect(claims.public_key).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it("configures and restarts each node exactly once; all leave provisioning mode and join the target broker", async () => {
    for (const identity of [...IDENTITIES, LATE]) {
      const node = provisioned.fleet.nodes.get(identity)!;
      expect({ identity, ...(await provisioningActions(node)) }).toEqual({ identity, configured: 1, restarted: 1 });
      expect(node.running).toBe(true);
    }
    const target = provisioned.targetEvents.of("startup");
    expect(target.map((event) => event.component)).toEqual(target.map(() => "server"));
    expect(new Set(target.map((event) => event.identity))).toEqual(new Set([...IDENTITIES, LATE]));
  });

  it("reaches the late node through its startup event, which the bridge read from Choria Streams", () => {
    const metrics = provisioned.stack.deployments[0]!.metrics;
    expect(metrics.total(METRIC.eventDiscovered)).toBeGreaterThanOrEqual(1);
    expect(provisioned.provisioningEvents.identities("startup", "provision_mode_server").has(LATE)).toBe(true);
    expect(provisioned.logs.of("no JetStream stream holds lifecycle events, listening on core NATS")).toEqual([]);
    // The first leading bridge made the site's consumer on go-choria's stream (a run's "finished" line may still be to come).
    const consumers = provisioned.logs.of("created the lifecycle consumer").map((record) => record.attributes?.stream);
    expect(consumers).toEqual(["CHORIA_EVENTS"]);
    const taken = provisioned.logs.of("lifecycle events taken").map((record) => record.attributes?.mode);
    expect(taken.length).toBeGreaterThan(0);
    expect(taken.filter((mode) => mode !== "jetstream")).toEqual([]);
    // Every startup event the late node published reached the lifecycle function.
    const lateEvents = provisioned.provisioningEvents.of("startup", "provision_mode_server").filter((event) => event.identity === LATE).length;
    expect(lateEvents).toBeGreaterThanOrEqual(1);
    expect(metrics.total(EXTRA_METRIC.lifecycleEventsReceived)).toBeGreaterThanOrEqual(lateEvents);
  });

  it("publishes the provisioner's own startup event inside the provisioning account", () => {
    const own = provisioned.provisioningEvents.of("startup", "provisioner");
    expect(own.length).toBeGreaterThanOrEqual(1);
  });

  it("lets the site's admin client ping every node and run rpcutil inventory on it", async () => {
    await adminReachesEveryNode(provisioned, [...IDENTITIES, LATE]);
  });
});
