/**
 * Renewal across a leader's crash on real go-choria fleets: v1 (jwt + pki), whose helper signs
 * certificates valid 300 s, and v2 (jwt + ed25519), whose server JWTs are valid 300 s. Each fleet is
 * provisioned by the leader of two deployments of one site (blue leads, green stands by), which
 * share the site's lease table and its one admission table, as production deployments do with the
 * `leaseTable` and `admissionTable` params. The leader is killed (stack.kill) once the fleet is on
 * the target broker, before any node is due; green wins the lease, its `status` lists blue's hosts
 * with their expiries, and its `renew` schedule sends every node reprovision before its credentials
 * expire. What the nodes hold and logged decides, as in renewal.test.ts: a new certificate the CA
 * signed (`openssl verify`, new serial, later notAfter) or a new server JWT from the site signer
 * (later exp), the reprovision each handled after the crash and the restart after it, its arrival on
 * the target broker again, and the admin's `choria ping` and `rpcutil inventory`.
 *
 * Timing follows the protocol's bounds: the renewal window opens `before` (210 s) ahead of expiry,
 * 90 s after provisioning, after the crash; green holds the lease once blue's stored expiry, the
 * skew bound and the delivery horizon have passed (~63 s with fast timings), which must happen
 * before the first credential expires; each node must then be sent reprovision before its
 * credentials expire, and is back within `renew.timeout` (120 s).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { provisionedFleet, verifyServerJwt, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { expectedExpiries, hostExpiries, killLeaderAndAwaitTakeover, type HostExpiries, type Takeover } from "../support/failover";
import { waitUntilAsync } from "../support/wait";
import { adminReachesEveryNode } from "./admin";
import { certificateFile, certificateOf, nodeEvents, run, serverJwtOf, type Certificate, type NodeEvents } from "./node-credentials";
import { renewSection, v1RenewalFleet } from "./renewal-settings";

const V1_NODES = ["f1.v1.fo-renew.example.net", "f2.v1.fo-renew.example.net", "f3.v1.fo-renew.example.net"];
const V2_NODES = ["f1.v2.fo-renew.example.net", "f2.v2.fo-renew.example.net", "f3.v2.fo-renew.example.net"];
const DEPLOYMENTS = ["blue", "green"];
const VALIDITY_S = 300;
const BEFORE_S = 210;
const RATE = 4;
const MAX_IN_FLIGHT = 2;
const TIMEOUT_S = 120;
/** Provisioning a fresh fleet: the real-fleet suites' bound for every node's arrival on the target broker. */
const ARRIVAL_MS = 180_000;
// A v1 node takes clients whose certificate name matches `\.mcollective$` (go-choria's default certname_whitelist).
const SENT_REPROVISION = "sent reprovision to renew the host's credentials";

/** One protocol's credentials: how to read them at the node, and when they expire (epoch ms). */
interface CredentialKind<Credential> {
  read(provisioned: ProvisionedFleet, identity: string): Promise<Credential>;
  expiresAt(credential: Credential): number;
}

const CERTIFICATES: CredentialKind<Certificate> = { read: certificateOf, expiresAt: (certificate) => certificate.notAfterMs };
const SERVER_JWTS: CredentialKind<Record<string, unknown>> = {
  read: async (provisioned, identity) => verifyServerJwt(await serverJwtOf(provisioned, identity), provisioned.serverJwtSigner),
  expiresAt: (claims) => Number(claims.exp) * 1000,
};

interface FailedOverFleet<Credential> {
  provisioned: ProvisionedFleet;
  identities: string[];
  takeover: Takeover;
  /** Each node's credentials as the leader provisioned them, and as the successor renewed them. */
  first: Map<string, Credential>;
  renewed: Map<string, Credential>;
  /** The status of the leader before it was killed, of its successor after the takeover and after renewal. */
  leaderSaw: HostExpiries;
  successorSaw: HostExpiries;
  successorAfterRenewal: HostExpiries;
  /** What each node logged, once renewal's first round is over. */
  events: Map<string, NodeEvents>;
  /** Why the successor's first round did not end, if it did not (the checks then fail with it). */
  renewalError?: string;
}

const TIMING = { beforeS: BEFORE_S, rate: RATE, maxInFlight: MAX_IN_FLIGHT, timeoutS: TIMEOUT_S };

const readAll = async <Credential>(provisioned: ProvisionedFleet, identities: string[], kind: CredentialKind<Credential>) =>
  new Map(await Promise.all(identities.map(async (identity) => [identity, await kind.read(provisioned, identity)] as const)));
const expiries = <Credential>(credentials: Map<string, Credential>, kind: CredentialKind<Credential>) =>
  new Map([...credentials].map(([identity, credential]) => [identity, kind.expiresAt(credential)]));

/**
 * Provisions the fleet under the leader, kills the leader and waits for its successor, lets the
 * successor's renewal run its first round, then reads what the nodes hold and what status says.
 */
async function failedOverFleet<Credential>(make: () => Promise<ProvisionedFleet>, identities: string[], kind: CredentialKind<Credential>): Promise<FailedOverFleet<Credential>> {
  const provisioned = await make();
  try {
    const { stack } = provisioned;
    await provisioned.fleet.startAll();
    stack.start();
    await waitForArrivals(provisioned, identities, ARRIVAL_MS);
    await stack.started;
    const first = await readAll(provisioned, identities, kind);
    const firstExpiry = expiries(first, kind);
    const leaderSaw = hostExpiries(await stack.deployments.find((deployment) => deployment.id === DEPLOYMENTS[0])!.app.status());
    const early = (await Promise.all(identities.map((identity) => nodeEvents(provisioned, identity)))).flatMap((events) => events.reprovisions);
    if (early.length > 0) throw new Error(`a node was sent reprovision before the leader was killed: ${early.length} requests`);
    // Without a successor the first credential to expire is lost: that is the takeover's bound here.
    const takeover = await killLeaderAndAwaitTakeover(stack, Math.min(...firstExpiry.values()));
    const successorSaw = hostExpiries(await takeover.successor.app.status());
    const events = new Map<string, NodeEvents>();
    // A node sent reprovision just before its credentials expire has renew.timeout to be provisioned again.
    const renewalError = await renewedOnce(provisioned, identities, events, Math.max(...firstExpiry.values()) + TIMEOUT_S * 1000).then(
      () => undefined,
      (error: unknown) => String(error),
    );
    const renewed = await readAll(provisioned, identities, kind);
    const successorAfterRenewal = hostExpiries(await takeover.successor.app.status());
    const figures = { takeoverSeconds: (takeover.tookOverAt - takeover.killedAt) / 1000, protocolBoundSeconds: (takeover.protocolBound - takeover.killedAt) / 1000 };
    process.stdout.write(`real-fleet renewal failover: ${takeover.killed.id}@${takeover.before.term} -> ${takeover.successor.id}@${takeover.after.term} ${JSON.stringify(figures)}\n`);
    return { provisioned, identities, takeover, first, renewed, leaderSaw, successorSaw, successorAfterRenewal, events, ...(renewalError ? { renewalError } : {}) };
  } catch (error) {
    await provisioned.stop();
    throw error;
  }
}

/**
 * Polls the nodes' logs until every one ran reprovision and was restarted into normal mode after
 * it, at the latest until `deadline`; then stops renewal's schedule (the renewed credentials fall
 * due again 90 s after they were issued, and the checks judge the first round) and waits until
 * every node answers the admin's ping, any node already sent again included.
 */
async function renewedOnce(provisioned: ProvisionedFleet, identities: string[], events: Map<string, NodeEvents>, deadline: number): Promise<void> {
  const readEvents = async () => {
    for (const identity of identities) events.set(identity, await nodeEvents(provisioned, identity));
  };
  try {
    await waitUntilAsync(async () => {
      await readEvents();
      const pending = identities.filter((identity) => {
        const { reprovisions, restarts } = events.get(identity)!;
        return !(reprovisions.length > 0 && restarts.some((at) => at >= reprovisions[0]!));
      });
      return pending.length === 0 ? undefined : `not renewed: ${pending.join(", ")}`;
    }, Math.max(0, deadline - Date.now()), 1_000);
  } finally {
    const renewSources = provisioned.stack.deployments.flatMap((deployment) => deployment.sources.filter((source) => source.name.endsWith("-renew")));
    await Promise.all(renewSources.map((source) => source.stop(60_000)));
  }
  const admin = await provisioned.fleet.adminClient();
  await waitUntilAsync(async () => {
    const ping = await admin.choria(["ping"]);
    return ping.stdout.includes(`${identities.length} replies`) ? undefined : `not every node answered the admin's ping: ${ping.stdout}`;
  }, (TIMEOUT_S + 30) * 1000, 2_000);
  await readEvents();
}

// Both fleets run side by side: each one's timing is its own protocol's, so the file takes one round, not two.
let v1Setup: Promise<FailedOverFleet<Certificate>>;
let v2Setup: Promise<FailedOverFleet<Record<string, unknown>>>;

beforeAll(() => {
  v1Setup = failedOverFleet(
    () =>
      provisionedFleet({
        identities: V1_NODES,
        ...v1RenewalFleet(TIMING, VALIDITY_S, inject("dynamoEndpoint")),
        deployments: DEPLOYMENTS,
      }),
    V1_NODES,
    CERTIFICATES,
  );
  v2Setup = failedOverFleet(
    () =>
      provisionedFleet({
        identities: V2_NODES,
        protocolV2: true,
        features: ["jwt", "ed25519"],
        deployments: DEPLOYMENTS,
        dynamoDbEndpoint: inject("dynamoEndpoint"),
        // The target broker and the nodes trust the client JWT's signer; the nodes' aaasvc authorization reads the agents it allows from it.
        clientCredentials: { siteSigned: true, agents: ["choria_provision.reprovision"] },
        config: (fleet) => ({
          server_jwt_validity: `${VALIDITY_S}s`,
          // The helper's nodes are on the mcollective collective, not v2's default `choria`.
          renew: { ...renewSection(TIMING, fleet.targetBroker.url), collective: "mcollective" },
        }),
      }),
    V2_NODES,
    SERVER_JWTS,
  );
  // Each describe block awaits its own and fails with its own error.
  return Promise.allSettled([v1Setup, v2Setup]).then(() => undefined);
}, ARRIVAL_MS + (VALIDITY_S + 2 * TIMEOUT_S + 120) * 1000);

afterAll(async () => {
  for (const setup of await Promise.allSettled([v1Setup, v2Setup])) if (setup.status === "fulfilled") await setup.value.provisioned.stop();
});

describe("real fleet renewal after the leader crashed, protocol v1 with jwt + pki", () => {
  let failedOver: FailedOverFleet<Certificate>;

  beforeAll(async () => {
    failedOver = await v1Setup;
  });

  sharedChecks(() => failedOver, CERTIFICATES);

  it("gives each node a new certificate the CA signed, with a new serial and a later notAfter", async () => {
    for (const identity of V1_NODES) {
      const verified = await run("openssl", ["verify", "-CAfile", failedOver.provisioned.fleet.ca.certFile, certificateFile(failedOver.provisioned, identity)]);
      expect(verified.stdout).toContain(": OK");
      expect(failedOver.renewed.get(identity)!.serial, identity).not.toBe(failedOver.first.get(identity)!.serial);
    }
  });
});

describe("real fleet renewal after the leader crashed, protocol v2 with jwt + ed25519", () => {
  let failedOver: FailedOverFleet<Record<string, unknown>>;

  beforeAll(async () => {
    failedOver = await v2Setup;
  });

  sharedChecks(() => failedOver, SERVER_JWTS);

  it("gives each node a new server JWT (a new jti) for its identity from the site signer (verified as read)", () => {
    for (const identity of V2_NODES) {
      expect(failedOver.renewed.get(identity)!.identity).toBe(identity);
      expect(failedOver.renewed.get(identity)!.jti, identity).not.toBe(failedOver.first.get(identity)!.jti);
    }
  });
});

/** What both protocols must show: the takeover, the successor's status, the renewal at the nodes. */
function sharedChecks<Credential>(fleet: () => FailedOverFleet<Credential>, kind: CredentialKind<Credential>): void {
  it("moves the lease from the killed leader to the standby under a higher term", () => {
    const { takeover } = fleet();
    expect({ killed: takeover.killed.id, successor: takeover.successor.id }).toEqual({ killed: DEPLOYMENTS[0], successor: DEPLOYMENTS[1] });
    expect(takeover.after.term).toBeGreaterThan(takeover.before.term);
  });

  it("shows in the successor's status every host its predecessor provisioned, with its credentials' expiry", () => {
    const { leaderSaw, successorSaw, first } = fleet();
    const atTheNodes = expectedExpiries(expiries(first, kind));
    expect(leaderSaw).toEqual(atTheNodes);
    expect(successorSaw).toEqual(atTheNodes);
  });

  it("renews every node from the successor before its credentials expire: handled after the crash, restarted into normal mode, back on the target broker", async () => {
    const { provisioned, identities, takeover, first, renewed, events, renewalError } = fleet();
    expect(renewalError).toBeUndefined();
    for (const identity of identities) {
      const { reprovisions, restarts } = events.get(identity)!;
      // Log times are whole seconds.
      expect(reprovisions[0]!, identity).toBeGreaterThanOrEqual(Math.floor(takeover.killedAt / 1000) * 1000);
      expect(reprovisions[0]!, identity).toBeLessThan(kind.expiresAt(first.get(identity)!));
      const back = restarts.find((at) => at >= reprovisions[0]!)!;
      expect(back - reprovisions[0]!, identity).toBeLessThanOrEqual(TIMEOUT_S * 1000);
      expect(kind.expiresAt(renewed.get(identity)!), identity).toBeGreaterThan(kind.expiresAt(first.get(identity)!));
      expect((await provisioned.fleet.nodes.get(identity)!.config())?.["plugin.choria.server.provision"], identity).toBe("false");
      const arrivals = provisioned.targetEvents.of("startup").filter((event) => event.identity === identity && event.at >= reprovisions[0]!);
      expect(arrivals.length, identity).toBeGreaterThanOrEqual(1);
    }
    // Our side: every reprovision was sent under the successor's term.
    const sends = provisioned.logs.of(SENT_REPROVISION).map((record) => ({ identity: record.attributes?.identity, term: record.attributes?.term }));
    expect(new Set(sends.map((send) => send.identity))).toEqual(new Set(identities));
    expect(sends.filter((send) => send.term !== takeover.after.term)).toEqual([]);
    await adminReachesEveryNode(provisioned, identities);
  });

  it("shows in the successor's status the same hosts, with their renewed credentials' expiry", () => {
    const { successorAfterRenewal, renewed } = fleet();
    expect(successorAfterRenewal).toEqual(expectedExpiries(expiries(renewed, kind)));
  });
}
