/**
 * Renewal on real go-choria fleets, with nobody acting: v1 (jwt + pki), whose helper signs
 * certificates valid 150 s, and v2 (jwt + ed25519), whose server JWTs are valid 150 s
 * (`server_jwt_validity`). The local stack's scheduled `renew` function sends each node
 * `choria_provision#reprovision` on the target broker before its credentials expire; the node
 * rewrites its configuration to provisioning mode, restarts, and the pipeline provisions it again.
 * What the nodes hold and logged decides: their certificate files (`openssl verify` against the
 * test CA, serial and notAfter) or server JWT (signature, exp), their written configuration, the
 * lines go-choria logs for each request it handles or denies and each restart it is asked for, and
 * a real `choria ping` from the site's admin.
 *
 * One v1 node's action policy denies choria_provision: it refuses the request, renewal marks it
 * with the node's reason, and the others are renewed all the same.
 *
 * Timing follows the protocol's bounds, not the machine's speed: the window opens `before` (120 s)
 * ahead of expiry, 30 s after provisioning, and each host starts in its first half (by 90 s). A
 * renewed host is out until it is provisioned again: its restart splay (2-12 s), and admission,
 * which takes a host again only an `interval` (60 s) after its last admission. With two in flight
 * the third node's turn comes well inside its 150 s.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { provisionedFleet, verifyServerJwt, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { waitUntilAsync } from "../support/wait";
import { certificateOf, nodeEvents, run, serverJwtOf, type Certificate, type NodeEvents } from "./node-credentials";
import { renewSection, v1RenewalFleet } from "./renewal-settings";

const GOOD = ["r1.v1.renew.example.net", "r2.v1.renew.example.net", "r3.v1.renew.example.net"];
const REFUSING = "deny.v1.renew.example.net";
const ALL = [...GOOD, REFUSING];
const VALIDITY_S = 150;
const BEFORE_S = 120;
const RATE = 4;
const MAX_IN_FLIGHT = 2;
const TIMEOUT_S = 120;
// A v1 node takes clients whose certificate name matches `\.mcollective$` (go-choria's default certname_whitelist).

interface RenewedFleet<Credential> {
  provisioned: ProvisionedFleet;
  /** Each node's credentials as first provisioned. */
  first: Map<string, Credential>;
  /** What each node logged, once renewal's first round is over. */
  events: Map<string, NodeEvents>;
  /** Each refusing node's mark, as `status` showed it when first there, and the denials logged before that read. */
  refusals: Map<string, Refusal>;
}

type RenewalFailure = Awaited<ReturnType<ProvisionedFleet["stack"]["deployments"][number]["app"]["status"]>>["renewal"]["failed"][number];

interface Refusal {
  mark: RenewalFailure;
  /** Every host status listed as failed in that read. */
  failed: string[];
  denialsBefore: number;
  paused: boolean;
}

const V2_NODES = ["r1.v2.renew.example.net", "r2.v2.renew.example.net", "r3.v2.renew.example.net"];

/** Provisions the fleet with `start`, then lets renewal run its first round; the fleet is stopped if that fails. */
async function renewedFleet<Credential>(
  make: () => Promise<ProvisionedFleet>,
  identities: { renewed: string[]; refusing: string[] },
  credential: (provisioned: ProvisionedFleet, identity: string) => Promise<Credential>,
): Promise<RenewedFleet<Credential>> {
  const provisioned = await make();
  try {
    const all = [...identities.renewed, ...identities.refusing];
    await provisioned.fleet.startAll();
    provisioned.stack.start();
    await waitForArrivals(provisioned, all, 180_000);
    const first = new Map<string, Credential>();
    for (const identity of all) first.set(identity, await credential(provisioned, identity));
    const events = new Map<string, NodeEvents>();
    const refusals = new Map<string, Refusal>();
    await renewedOnce(provisioned, identities.renewed, identities.refusing, events, refusals);
    return { provisioned, first, events, refusals };
  } catch (error) {
    await provisioned.stop();
    throw error;
  }
}

const TIMING = { beforeS: BEFORE_S, rate: RATE, maxInFlight: MAX_IN_FLIGHT, timeoutS: TIMEOUT_S };

// Both fleets run side by side: each one's timing is its own protocol's, so the file takes one round, not two.
let v1Setup: Promise<RenewedFleet<Certificate>>;
let v2Setup: Promise<RenewedFleet<Record<string, unknown>>>;

beforeAll(() => {
  v1Setup = renewedFleet(
    async () => {
      const provisioned = await provisionedFleet({
        identities: GOOD,
        ...v1RenewalFleet(TIMING, VALIDITY_S, inject("dynamoEndpoint")),
      });
      await provisioned.fleet.addNode(REFUSING, { start: false, policies: { choria_provision: "policy default deny\n" } });
      return provisioned;
    },
    { renewed: GOOD, refusing: [REFUSING] },
    certificateOf,
  );
  v2Setup = renewedFleet(
    () =>
      provisionedFleet({
        identities: V2_NODES,
        protocolV2: true,
        features: ["jwt", "ed25519"],
        dynamoDbEndpoint: inject("dynamoEndpoint"),
        // The node-side requirement for v2: the target broker and the nodes trust the JWT's signer,
        // and the nodes' aaasvc authorization reads the agents it allows from the JWT.
        clientCredentials: { siteSigned: true, agents: ["choria_provision.reprovision"] },
        config: (fleet) => ({
          server_jwt_validity: `${VALIDITY_S}s`,
          // The helper's nodes are on the mcollective collective, not v2's default `choria`.
          renew: { ...renewSection(TIMING, fleet.targetBroker.url), collective: "mcollective" },
        }),
      }),
    { renewed: V2_NODES, refusing: [] },
    async (provisioned, identity) => verifyServerJwt(await serverJwtOf(provisioned, identity), provisioned.serverJwtSigner),
  );
  // Each describe block awaits its own and fails with its own error.
  return Promise.allSettled([v1Setup, v2Setup]).then(() => undefined);
});

afterAll(async () => {
  for (const setup of await Promise.allSettled([v1Setup, v2Setup])) if (setup.status === "fulfilled") await setup.value.provisioned.stop();
});

describe("real fleet renewal, protocol v1 with jwt + pki", () => {
  let provisioned: ProvisionedFleet;
  let first: Map<string, Certificate>;
  let events: Map<string, NodeEvents>;
  let refusals: Map<string, Refusal>;

  beforeAll(async () => {
    ({ provisioned, first, events, refusals } = await v1Setup);
  });

  it("renews each good node before its certificate expires: a new certificate the CA signed, later notAfter, back in normal mode", async () => {
    for (const identity of GOOD) {
      const node = provisioned.fleet.nodes.get(identity)!;
      const before = first.get(identity)!;
      const { reprovisions } = events.get(identity)!;
      expect(reprovisions[0]!, identity).toBeLessThan(before.notAfterMs);
      const verified = await run("openssl", ["verify", "-CAfile", provisioned.fleet.ca.certFile, join(node.configDir, "ssl", "certificate.pem")]);
      expect(verified.stdout).toContain(": OK");
      const now = await certificateOf(provisioned, identity);
      expect(now.serial, identity).not.toBe(before.serial);
      expect(now.notAfterMs, identity).toBeGreaterThan(before.notAfterMs);
      expect((await node.config())?.["plugin.choria.server.provision"], identity).toBe("false");
      expect(node.running).toBe(true);
    }
  });

  it("marks the node that refused with its reason, tries it again later, leaves it in service, and renews the others", async () => {
    const { denials, reprovisions } = events.get(REFUSING)!;
    // go-choria denies before it handles: a denied request has no "Handling message" line. Renewal
    // tries a refusing host again with backoff while its credentials are valid.
    expect(denials.length).toBeGreaterThanOrEqual(1);
    expect(reprovisions).toEqual([]);
    expect(await certificateOf(provisioned, REFUSING)).toEqual(first.get(REFUSING));
    // Where the mark lands: the host's entry in the site's admission table, as `status` reports it.
    // It was read while the host's credentials were valid (status shows failed renewals of those only).
    const refusal = refusals.get(REFUSING)!;
    expect(refusal.failed).toEqual([REFUSING]);
    expect(refusal.mark.reason).toContain("not authorized");
    // The events were read before status: a retry may have landed between the two.
    expect(refusal.mark.attempts).toBeGreaterThanOrEqual(refusal.denialsBefore);
    expect(refusal.denialsBefore).toBeGreaterThanOrEqual(1);
    expect(refusal.paused).toBe(false);
  });

  it("keeps each node out of service no longer than renew.timeout, never more than max_in_flight at once, at no more than the rate (from the nodes' logs)", () => {
    expectLimitsHeld(GOOD, ALL, events);
  });
});

describe("real fleet renewal, protocol v2 with jwt + ed25519", () => {
  let provisioned: ProvisionedFleet;
  let first: Map<string, Record<string, unknown>>;
  let events: Map<string, NodeEvents>;

  beforeAll(async () => {
    ({ provisioned, first, events } = await v2Setup);
  });

  it("renews each node before its server JWT expires: a new JWT from the site signer that expires later, back in normal mode", async () => {
    for (const identity of V2_NODES) {
      const node = provisioned.fleet.nodes.get(identity)!;
      const before = first.get(identity)!;
      expect(events.get(identity)!.reprovisions[0]!, identity).toBeLessThan(Number(before.exp) * 1000);
      const now = verifyServerJwt(await serverJwtOf(provisioned, identity), provisioned.serverJwtSigner);
      expect(now.identity).toBe(identity);
      expect(Number(now.exp), identity).toBeGreaterThan(Number(before.exp));
      expect((await node.config())?.["plugin.choria.server.provision"], identity).toBe("false");
      expect(node.running).toBe(true);
    }
  });

  it("keeps each node out of service no longer than renew.timeout, never more than max_in_flight at once, at no more than the rate (from the nodes' logs)", () => {
    expectLimitsHeld(V2_NODES, V2_NODES, events);
  });
});

/**
 * Keeps each refusing node's mark the first time status shows it after the node denied a request.
 * Read as the round goes: once the node's credentials expire (150 s), status no longer lists it
 * among failed renewals, and a machine under load can take that long to finish the round.
 */
async function noteRefusals(provisioned: ProvisionedFleet, refusing: string[], events: Map<string, NodeEvents>, refusals: Map<string, Refusal>): Promise<void> {
  const denied = refusing.filter((identity) => !refusals.has(identity) && events.get(identity)!.denials.length > 0);
  if (denied.length === 0) return;
  const { renewal } = await provisioned.stack.deployments[0]!.app.status();
  for (const identity of denied) {
    const mark = renewal.failed.find((failure) => failure.identity === identity);
    if (mark) refusals.set(identity, { mark, failed: renewal.failed.map((failure) => failure.identity), denialsBefore: events.get(identity)!.denials.length, paused: renewal.paused !== undefined });
  }
}

/** Out of service from the reprovision a node handled to its next restart into normal mode; sends are handled or denied requests. */
function expectLimitsHeld(renewed: string[], all: string[], events: Map<string, NodeEvents>): void {
  const outages = renewed.flatMap((identity) => {
    const { reprovisions, restarts } = events.get(identity)!;
    return reprovisions.map((from) => ({ identity, from, to: restarts.find((at) => at >= from) ?? Number.POSITIVE_INFINITY }));
  });
  for (const outage of outages) {
    expect(outage.to - outage.from, outage.identity).toBeLessThanOrEqual(TIMEOUT_S * 1000);
    // Log times are whole seconds: an outage that starts in the second another ends does not overlap it.
    expect(outages.filter((other) => other.from <= outage.from && other.to > outage.from).length).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  }
  const sends = all.flatMap((identity) => [...events.get(identity)!.reprovisions, ...events.get(identity)!.denials]).sort((a, b) => a - b);
  expect(sends.length).toBeGreaterThanOrEqual(renewed.length);
  for (const at of sends) expect(sends.filter((other) => other >= at && other < at + 60_000).length).toBeLessThanOrEqual(RATE);
}

/**
 * Polls the nodes' logs until every one of `renewed` ran reprovision and was restarted into normal
 * mode after it, and each of `refusing` denied it; then stops renewal's schedule (the renewed
 * credentials fall due again 30 s after they were issued, and the checks judge the first round) and
 * waits until every node answers the admin's ping, any node already sent again included.
 */
async function renewedOnce(
  provisioned: ProvisionedFleet,
  renewed: string[],
  refusing: string[],
  events: Map<string, NodeEvents>,
  refusals: Map<string, Refusal>,
): Promise<void> {
  const all = [...renewed, ...refusing];
  const pendingNodes = async () => {
    for (const identity of all) events.set(identity, await nodeEvents(provisioned, identity));
    const pending = renewed.filter((identity) => {
      const { reprovisions, restarts } = events.get(identity)!;
      return !(reprovisions.length > 0 && restarts.some((at) => at >= reprovisions[0]!));
    });
    await noteRefusals(provisioned, refusing, events, refusals);
    return [...pending, ...refusing.filter((identity) => !refusals.has(identity))];
  };
  const deadline = Date.now() + (VALIDITY_S + TIMEOUT_S) * 1000;
  for (let pending = await pendingNodes(); pending.length > 0; pending = await pendingNodes()) {
    if (Date.now() > deadline) throw new Error(`not renewed: ${pending.join(", ")}`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  await Promise.all(provisioned.stack.deployments.flatMap((deployment) => deployment.sources.filter((source) => source.name.endsWith("-renew")).map((source) => source.stop(60_000))));
  // A host renewed early in the round is renewable again 30 s later (150 s validity, 120 s before):
  // on a slow machine a run before the stop may have sent it a second reprovision. That renewal is
  // let finish, so every node is back in service, on its written configuration, when it is read.
  const admin = await provisioned.fleet.adminClient();
  await waitUntilAsync(async () => {
    for (const identity of all) {
      const config = await provisioned.fleet.nodes.get(identity)!.config();
      if (config?.["plugin.choria.server.provision"] !== "false") return `${identity} is not back in service yet: its configuration is in provisioning mode`;
    }
    const ping = await admin.choria(["ping"]);
    return ping.stdout.includes(`${all.length} replies`) ? undefined : `not every node answered the admin's ping: ${ping.stdout}`;
  }, (TIMEOUT_S + 30) * 1000, 2_000);
  for (const identity of all) events.set(identity, await nodeEvents(provisioned, identity));
}
