import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { loadJwtVerifier, verifyProvisioningJwt } from "../../../lib/crypto/jwt";
import { type RunningNats, startNats } from "../../../dev/local/services";
import { type FleetOptions, startFleet } from "../../../dev/simulator";
import { discoverer, FLEET_TOKEN, rpcClient } from "../../support/simulator";

const run = promisify(execFile);
const signer = ed25519SigningKey(generateEd25519Seed());
// Fixed claims and signer make the provisioning.jwt the same on every start (Ed25519 is deterministic).
const FIXED_CLAIMS = { chu: "tls://provisioning.example.net:4222", iat: 1_764_000_000, nbf: 1_764_000_000, exp: 2_000_000_000, jti: "36GAN1vXLc0kbqAYAKyqEjy8nY0" };

let dir: string;
let certPem: string;
let tlsArgs: string[];

async function selfSignedCertificate(): Promise<void> {
  dir = await mkdtemp(join(tmpdir(), "fleet-tls-"));
  const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
  await run("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
    "-subj", "/CN=provisioning broker", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert,
  ]);
  certPem = await readFile(cert, "utf8");
  tlsArgs = ["--tls", "--tlscert", cert, "--tlskey", key];
}

const fleetOptions = (natsUrl: string, extra: Partial<FleetOptions> = {}): FleetOptions => ({
  natsUrl,
  identities: ["tls1.example.net"],
  token: FLEET_TOKEN,
  tls: true,
  provisioningSigner: signer,
  jwtClaims: FIXED_CLAIMS,
  ...extra,
});

beforeAll(selfSignedCertificate);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// go-choria choria/connection.go, provisioning mode: nats.Token(<provisioning.jwt>) and nats.Secure
// with InsecureSkipVerify (anonymous TLS).
describe("a fleet dialling the provisioning broker as real nodes do", () => {
  let nats: RunningNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNats({ args: tlsArgs });
    nc = await connect({ servers: nats.url, tls: { ca: certPem } });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("connects over TLS without verifying the broker's self-signed certificate, is discovered and serves its JWT", async () => {
    const fleet = await startFleet(fleetOptions(nats.url, { jwtFileSuffix: "\n" }));
    try {
      const found = await discoverer(nc, 1).discover();
      const reply = await rpcClient(nc, 1).call({ identity: "tls1.example.net", agent: "choria_provision", action: "jwt", data: { token: FLEET_TOKEN }, timeoutMs: 4_000 });

      expect(found).toEqual(["tls1.example.net"]);
      expect(reply.data.jwt).toBe(fleet.provisioningJwt);
      expect(fleet.provisioningJwt.endsWith("\n")).toBe(true);
      const verifier = await loadJwtVerifier(signer.alg === "EdDSA" ? signer.publicKeyHex : "");
      expect(await verifyProvisioningJwt(String(reply.data.jwt), verifier, new Date(1_800_000_000_000))).toMatchObject({ cht: FLEET_TOKEN });
    } finally {
      await fleet.stop();
    }
  });

  it("presents its provisioning.jwt as the NATS token", async () => {
    const probe = await startFleet(fleetOptions(nats.url));
    const jwt = probe.provisioningJwt;
    await probe.stop();
    const guarded = await startNats({ args: [...tlsArgs, "--auth", jwt] });
    try {
      const fleet = await startFleet(fleetOptions(guarded.url));
      await fleet.stop();
      const other = startFleet(fleetOptions(guarded.url, { token: "another-token", identities: ["tls2.example.net"] }));

      expect(fleet.provisioningJwt).toBe(jwt);
      await expect(other).rejects.toThrow(/authorization/i);
    } finally {
      await guarded.stop();
    }
  });

  it("cannot connect to a broker that offers no TLS", async () => {
    const plain = await startNats();
    try {
      await expect(startFleet(fleetOptions(plain.url))).rejects.toThrow(/tls/i);
    } finally {
      await plain.stop();
    }
  });
});
