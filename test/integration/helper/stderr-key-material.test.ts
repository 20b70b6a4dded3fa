/**
 * A helper that fails after printing key material only on stderr (no value we know: not configured,
 * not in the host's claims, not in its stdout) puts none of it where the failure lands: the
 * dead-letter attributes, the admission table, `status`, the log. The shapes: a private key's PEM
 * block, one cut off before its END (the helper died printing it), a JWT, an NKEY seed and an
 * ed25519 seed in hex. Real NATS, DynamoDB Local and fauxqs, through the discover and provision
 * handlers, as test/integration/app/helper-stderr-secrets.test.ts does for the values we know.
 */
import { generateKeyPairSync, randomBytes, sign } from "node:crypto";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { servicesForSuite, type LocalResources } from "../../support/aws";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";
import { provisionUntilParked } from "../../support/parked-failure";

const LIMIT = 3;
/** What an error quotes of stderr at most: the whole of this helper's stderr fits, so nothing leaks only for want of a cut. */
const SHOWN_CHARS = 512;
const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

function base64url(value: string | Buffer): string {
  return Buffer.from(value).toString("base64url");
}

/** Key material of every shape, each freshly made, so no value of it is known anywhere. */
function keyMaterial() {
  const { privateKey } = generateKeyPairSync("ed25519");
  const pem = (privateKey.export({ format: "pem", type: "pkcs8" }) as string).trim();
  const cutPem = (generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }) as string).split("\n");
  const signingInput = `${base64url(JSON.stringify({ alg: "EdDSA", typ: "JWT" }))}.${base64url(JSON.stringify({ sub: "ca" }))}`;
  const jwt = `${signingInput}.${base64url(sign(null, Buffer.from(signingInput), privateKey))}`;
  const nkeySeed = `SU${[...randomBytes(56)].map((byte) => BASE32[byte % 32]).join("")}`;
  const hexSeed = randomBytes(32).toString("hex");
  // The cut key: its BEGIN line and the first half of its body, as a helper killed mid-print leaves it.
  const cutBody = cutPem[1] ?? "";
  const cut = `${cutPem[0]}\n${cutBody.slice(0, 40)}`;
  const stderr = [`signer token ${jwt}`, `nkey ${nkeySeed}`, `ed25519 ${hexSeed}`, "issued:", pem, "again:", cut].join("\n");
  const secrets = [jwt, jwt.split(".")[1] ?? "", jwt.split(".")[2] ?? "", nkeySeed, hexSeed, ...pem.split("\n").slice(1, -1), cutBody.slice(0, 40)];
  return { stderr, secrets };
}

const services = servicesForSuite();
const material = keyMaterial();
let fleet: Fleet;
let deployment: Deployment;
let resources: LocalResources;
let dir: string;
const logLines: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "key-stderr-helper-"));
  const printed = join(dir, "stderr.txt");
  await writeFile(printed, material.stderr);
  const helper = join(dir, "key-stderr-helper.sh");
  // Nothing on stdout: the key material is on stderr only.
  await writeFile(helper, ["#!/bin/sh", "cat > /dev/null", `cat '${printed}' >&2`, "exit 1"].join("\n"));
  await chmod(helper, 0o755);
  resources = await services.resources(`keystderr-${Date.now()}`);
  fleet = await startFleet({ natsUrl: services.nats.url, identities: ["k1.example.net"], token: TOKEN, restartDelayMs: 50 });
  deployment = await startDeployment({
    site: "keystderr",
    deploymentId: "leader",
    natsUrl: services.nats.url,
    resources,
    helper,
    logger: createConsoleLogger({ level: "debug", write: (line) => logLines.push(line) }),
  });
});

afterAll(async () => {
  await deployment?.app.close();
  await fleet?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a helper that prints key material only on stderr and fails", () => {
  it("leaves no key, token or seed in the DLQ attributes, the table, status or the log", async () => {
    // Arrange
    expect(material.stderr.length).toBeLessThan(SHOWN_CHARS);

    // Act: provision until the host is parked on the DLQ.
    const { dead, status, landed } = await provisionUntilParked({ services, resources, deployment, logLines, rounds: LIMIT });

    // Assert
    for (const [where, text] of Object.entries(landed)) {
      for (const secret of material.secrets) expect(text.includes(secret), `${where} holds ${secret}`).toBe(false);
    }
    // The failure did land in each of them, with the helper's masked stderr.
    expect(dead).toHaveLength(1);
    const reason = dead[0]?.MessageAttributes?.reason?.StringValue ?? "";
    expect(reason).toBe(
      `helper: cannot read ${dir}/key-stderr-helper.sh output: zero bytes received; stderr: signer token [redacted]\nnkey [redacted]\ned25519 [redacted]\nissued:\n[redacted]\nagain:\n[redacted]`,
    );
    expect(landed.table).toContain("signer token [redacted]");
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "k1.example.net", failedStep: "helper" })]);
    expect(landed.log).toContain("signer token [redacted]");
  });
});
