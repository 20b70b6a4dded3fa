/**
 * Renewal on a real go-choria fleet (protocol v1, jwt + pki): the helper signs certificates valid
 * 150 s, and the local stack's scheduled `renew` function, with nobody acting, sends each node
 * `choria_provision#reprovision` on the target broker before its certificate expires. The node
 * rewrites its configuration to provisioning mode, restarts, and the pipeline provisions it again
 * with a new certificate. What the nodes hold and logged decides: their certificate files
 * (`openssl verify` against the test CA, serial and notAfter), their written configuration, the
 * lines go-choria logs for each request it handles and each restart it is asked for, and a real
 * `choria ping` from the site's admin.
 *
 * One node's action policy denies choria_provision: it refuses the request, renewal marks it with
 * the node's reason, and the others are renewed all the same.
 *
 * Timing follows the protocol's bounds, not the machine's speed: the window opens `before` (120 s)
 * ahead of expiry, 30 s after provisioning, and each host starts in its first half (by 90 s). A
 * renewed host is out until it is provisioned again: its restart splay (2-12 s), and admission,
 * which takes a host again only an `interval` (60 s) after its last admission. With two in flight
 * the third good node's turn comes well inside its 150 s.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { issueCertificate } from "../../dev/local/real-fleet";
import { provisionedFleet, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";

const run = promisify(execFile);

const GOOD = ["r1.v1.renew.example.net", "r2.v1.renew.example.net", "r3.v1.renew.example.net"];
const REFUSING = "deny.v1.renew.example.net";
const ALL = [...GOOD, REFUSING];
const VALIDITY_S = 150;
const BEFORE_S = 120;
const RATE = 4;
const MAX_IN_FLIGHT = 2;
const TIMEOUT_S = 120;
// A v1 node takes clients whose certificate name matches `\.mcollective$` (go-choria's default certname_whitelist).
const RENEWAL_CERTNAME = "provisioner.mcollective";
const CALLER = `choria=${RENEWAL_CERTNAME}`;

interface Certificate {
  serial: string;
  notAfterMs: number;
}

async function certificateOf(provisioned: ProvisionedFleet, identity: string): Promise<Certificate> {
  const file = join(provisioned.fleet.nodes.get(identity)!.configDir, "ssl", "certificate.pem");
  const { stdout } = await run("openssl", ["x509", "-noout", "-serial", "-enddate", "-in", file]);
  return {
    serial: /serial=(\S+)/.exec(stdout)?.[1] ?? "",
    notAfterMs: Date.parse(/notAfter=(.+)/.exec(stdout)?.[1] ?? ""),
  };
}

interface NodeEvents {
  /** go-choria's "Handling message ... for choria_provision#reprovision" lines: each request it ran. */
  reprovisions: number[];
  /** Its "Denying ... access to choria_provision#reprovision" lines (a denied request is not "handled"). */
  denials: number[];
  /** "Restarting server via request": the restart after `configure`, back into normal mode. */
  restarts: number[];
}

/** The times (epoch ms, to the second: logrus' text format) of the node's lines that matter here. */
async function nodeEvents(provisioned: ProvisionedFleet, identity: string): Promise<NodeEvents> {
  const lines = (await provisioned.fleet.nodes.get(identity)!.log()).split("\n");
  const times = (pattern: RegExp) =>
    lines.filter((line) => pattern.test(line)).map((line) => Date.parse(/time="([^"]+)"/.exec(line)?.[1] ?? ""));
  return {
    reprovisions: times(/Handling message \S+ for choria_provision#reprovision from /),
    denials: times(/Denying \S+ access to choria_provision#reprovision /),
    restarts: times(/Restarting server via request /),
  };
}

describe("real fleet renewal, protocol v1 with jwt + pki", () => {
  let provisioned: ProvisionedFleet;
  const first = new Map<string, Certificate>();
  const events = new Map<string, NodeEvents>();

  beforeAll(async () => {
    provisioned = await provisionedFleet({
      identities: GOOD,
      protocolV2: false,
      features: ["jwt", "pki"],
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      certificateValiditySeconds: VALIDITY_S,
      // The node-side requirement docs/renewal.md names: an action policy that lets the provisioner call reprovision.
      policies: { choria_provision: `policy default deny\nallow\t${CALLER}\treprovision\t*\t*\n` },
      config: async (fleet) => {
        const certificate = await issueCertificate(fleet.ca, join(fleet.dir, "renewal-client-tls"), RENEWAL_CERTNAME, { rsa: true });
        return {
          callerid: CALLER,
          tls: { ca: fleet.ca.certFile, cert: certificate.certFile, key: certificate.keyFile },
          renew: {
            enabled: true,
            before: `${BEFORE_S}s`,
            rate: RATE,
            max_in_flight: MAX_IN_FLIGHT,
            timeout: `${TIMEOUT_S}s`,
            broker_urls: [fleet.targetBroker.url],
          },
        };
      },
    });
    await provisioned.fleet.addNode(REFUSING, { start: false, policies: { choria_provision: "policy default deny\n" } });
    await provisioned.fleet.startAll();
    provisioned.stack.start();
    await waitForArrivals(provisioned, ALL, 180_000);
    for (const identity of ALL) first.set(identity, await certificateOf(provisioned, identity));

    // Every good node renewed once (it ran reprovision and was restarted into normal mode after it),
    // and the refusing node refused: all inside the first certificates' lifetime and renew.timeout.
    const renewed = async () => {
      for (const identity of ALL) events.set(identity, await nodeEvents(provisioned, identity));
      const pending = GOOD.filter((identity) => {
        const { reprovisions, restarts } = events.get(identity)!;
        return !(reprovisions.length > 0 && restarts.some((at) => at >= reprovisions[0]!));
      });
      return events.get(REFUSING)!.denials.length === 0 ? [...pending, REFUSING] : pending;
    };
    const deadline = Date.now() + (VALIDITY_S + TIMEOUT_S) * 1000;
    for (let pending = await renewed(); pending.length > 0; pending = await renewed()) {
      if (Date.now() > deadline) throw new Error(`not renewed: ${pending.join(", ")}`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    // The renewed certificates fall due again 30 s after they were issued; the checks below judge the
    // first round, so renewal's schedule stops here and any node already sent again is let come back.
    await Promise.all(provisioned.stack.deployments.flatMap((deployment) => deployment.sources.filter((source) => source.name.endsWith("-renew")).map((source) => source.stop(60_000))));
    const admin = await provisioned.fleet.adminClient();
    await waitUntilAsync(async () => {
      const ping = await admin.choria(["ping"]);
      return ping.stdout.includes(`${ALL.length} replies`) ? undefined : `not every node answered the admin's ping: ${ping.stdout}`;
    }, (TIMEOUT_S + 30) * 1000);
    for (const identity of ALL) events.set(identity, await nodeEvents(provisioned, identity));
  });

  afterAll(async () => {
    await provisioned?.stop();
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

  it("marks the node that refused with its reason, leaves it in service, and renews the others", async () => {
    const { denials, reprovisions } = events.get(REFUSING)!;
    // go-choria denies before it handles: a denied request has no "Handling message" line. Renewal
    // does not send a host it gave up on again.
    expect({ denials: denials.length, reprovisions: reprovisions.length }).toEqual({ denials: 1, reprovisions: 0 });
    expect(await certificateOf(provisioned, REFUSING)).toEqual(first.get(REFUSING));
    // Where the mark lands: renewal's state in the admission table, as `status` reports it.
    const status = await provisioned.stack.deployments[0]!.app.status();
    expect(status.renewal.failed.map((mark) => mark.identity)).toEqual([REFUSING]);
    expect(status.renewal.failed[0]!.reason).toContain("not authorized");
    expect(status.renewal.paused).toBeUndefined();
  });

  it("keeps each node out of service no longer than renew.timeout, never more than max_in_flight at once, at no more than the rate (from the nodes' logs)", () => {
    const outages = GOOD.flatMap((identity) => {
      const { reprovisions, restarts } = events.get(identity)!;
      return reprovisions.map((from) => ({ identity, from, to: restarts.find((at) => at >= from) ?? Number.POSITIVE_INFINITY }));
    });
    for (const outage of outages) {
      expect(outage.to - outage.from, outage.identity).toBeLessThanOrEqual(TIMEOUT_S * 1000);
      // Log times are whole seconds: an outage that starts in the second another ends does not overlap it.
      expect(outages.filter((other) => other.from <= outage.from && other.to > outage.from).length).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    }
    const sends = ALL.flatMap((identity) => [...events.get(identity)!.reprovisions, ...events.get(identity)!.denials]).sort((a, b) => a - b);
    for (const at of sends) expect(sends.filter((other) => other >= at && other < at + 60_000).length).toBeLessThanOrEqual(RATE);
  });
});

async function waitUntilAsync(what: () => Promise<string | undefined>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = await what();
    if (missing === undefined) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${missing}`);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}
