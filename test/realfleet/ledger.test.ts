/**
 * The issuance ledger on a real go-choria fleet (protocol v1, jwt + pki): a node provisioned, then
 * renewed twice by the local stack's scheduled `renew` function (its certificates are valid 150 s,
 * renewed from 120 s before expiry). After each step the node's certificate file is read with
 * `openssl x509`; then `choria-provisioner history <identity>`, run as docs/audit.md tells an
 * operator to, must list three issuances (provision, renewal, renewal) whose serials and SHA-256
 * fingerprints are the node's files' at each point, signed by the fleet's CA, the last one live.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../../cli/cli";
import { provisionedFleet, waitForArrivals, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import type { IssuanceHistory } from "../../lib/app/operator/issuance-operator";
import { waitUntilAsync } from "../support/wait";
import { certificateFile, run } from "./node-credentials";
import { v1RenewalFleet } from "./renewal-settings";

const IDENTITY = "l1.v1.ledger.example.net";
const VALIDITY_S = 150;
const TIMING = { beforeS: 120, rate: 4, maxInFlight: 1, timeoutS: 120 };
/** One renewal's bound: the window opens 30 s after issue and the host starts in its first half; then admission (an `interval`, 60 s) and provisioning. */
const RENEWAL_WITHIN_MS = (VALIDITY_S + 60) * 1000;

interface NodeCertificate {
  serial: string;
  sha256: string;
  issuer: string;
}

/** The node's certificate file as openssl reads it. */
async function nodeCertificate(provisioned: ProvisionedFleet): Promise<NodeCertificate> {
  const { stdout } = await run("openssl", ["x509", "-noout", "-serial", "-fingerprint", "-sha256", "-issuer", "-nameopt", "RFC2253", "-in", certificateFile(provisioned, IDENTITY)]);
  return {
    serial: /serial=(\S+)/.exec(stdout)?.[1] ?? "",
    sha256: /Fingerprint=(\S+)/i.exec(stdout)?.[1] ?? "",
    issuer: /issuer=(.+)/.exec(stdout)?.[1]?.trim() ?? "",
  };
}

/** Serials compare as numbers: openssl and Node may pad them differently. */
const serialNumber = (hex: string) => BigInt(`0x${hex}`);

let provisioned: ProvisionedFleet;
/** The node's certificate after provisioning and after each renewal. */
const seen: NodeCertificate[] = [];

beforeAll(async () => {
  provisioned = await provisionedFleet({ identities: [IDENTITY], ...v1RenewalFleet(TIMING, VALIDITY_S, inject("dynamoEndpoint")) });
  await provisioned.fleet.startAll();
  provisioned.stack.start();
  await waitForArrivals(provisioned, [IDENTITY], 180_000);
  seen.push(await nodeCertificate(provisioned));
  for (const renewal of [1, 2]) {
    await waitUntilAsync(
      async () => {
        const now = await nodeCertificate(provisioned).catch(() => undefined);
        if (now && now.sha256 !== "" && now.sha256 !== seen.at(-1)?.sha256) {
          seen.push(now);
          return undefined;
        }
        return `renewal ${renewal}: the node still holds certificate ${seen.at(-1)?.serial}`;
      },
      RENEWAL_WITHIN_MS,
      1_000,
    );
  }
}, 180_000 + 2 * RENEWAL_WITHIN_MS + 60_000);

afterAll(async () => {
  await provisioned?.stop();
});

describe("the issuance ledger on a real fleet", () => {
  it("history lists the node's three certificates, as its files held them after provisioning and each renewal, the last live", async () => {
    // Act: the CLI as an operator runs it against the stack's site and admission table.
    const { stack } = provisioned;
    let stdout = "";
    let stderr = "";
    const code = await runCli(
      ["history", IDENTITY, "--json", "--site", stack.site, "--admission-table", stack.tables.admission, "--lease-table", stack.tables.lease, "--dynamodb-endpoint", inject("dynamoEndpoint")],
      { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text), env: {} },
    );

    // Assert
    expect(code, stderr).toBe(0);
    const history = JSON.parse(stdout) as IssuanceHistory;
    expect(seen).toHaveLength(3);
    expect(history.issuances.map((record) => record.kind)).toEqual(["provision", "renewal", "renewal"]);
    history.issuances.forEach((record, step) => {
      const file = seen[step]!;
      expect(record.identity).toBe(IDENTITY);
      expect(serialNumber(record.certificate!.serial), `serial at step ${step}`).toBe(serialNumber(file.serial));
      expect(record.certificate!.sha256, `fingerprint at step ${step}`).toBe(file.sha256);
      expect(record.credentialId).toBe(file.sha256);
      expect(record.certificate!.issuer.split(", ").sort()).toEqual(file.issuer.split(",").sort());
      expect(record.serverJwt).toBeUndefined();
    });
    expect(history.issuances.map((record) => record.live)).toEqual([false, false, true]);
    expect(history.liveCredentialId).toBe(seen[2]!.sha256);
  });
});
