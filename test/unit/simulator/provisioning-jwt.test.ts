import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { encodeBase64Url } from "../../../lib/crypto/encoding";
import { mintProvisioningJwt } from "../../support/choria-node/server-jwt";
import { readProvisioningJwtFile } from "../../../dev/simulator/provisioning-jwt";

const signer = ed25519SigningKey(generateEd25519Seed());
/** The claims `choria jwt prov --token s3cret --urls nats://b:4222 --default` writes. */
const JWT_PROV = {
  cht: "s3cret",
  chs: false,
  chu: "nats://b:4222",
  chpd: true,
  extensions: null,
  ou: "choria",
  purpose: "choria_provisioning",
  iss: "Choria Tokens Package",
  sub: "choria_provisioning",
  exp: 1_900_000_000,
  nbf: 1_700_000_000,
  iat: 1_700_000_000,
  jti: "2Z0mYJ1o3nR8f6d3b1q2w3e4r5t",
};
const file = (claims: Record<string, unknown>) => mintProvisioningJwt(claims, signer);
const without = (...names: string[]) => Object.fromEntries(Object.entries(JWT_PROV).filter(([name]) => !names.includes(name)));

// go-choria providers/provtarget/builddefaults SetBuildBasedOnJWT over tokens ParseProvisionTokenUnverified.
describe("a node reading its provisioning.jwt", () => {
  it("takes its settings from what `choria jwt prov` writes, a trailing newline included", async () => {
    const reading = readProvisioningJwtFile(`${await file({ ...JWT_PROV, v2: true, update: true })}\n`);

    expect(reading).toEqual({
      ok: true,
      settings: { token: "s3cret", urls: "nats://b:4222", srvDomain: "", provisionDefault: true, secure: false, protocolVersion: 2, allowUpdate: true },
    });
  });

  it("needs a token and exactly one of broker URLs or an SRV domain", async () => {
    expect(readProvisioningJwtFile(await file({ ...JWT_PROV, cht: "" }))).toEqual({ ok: false, reason: "no auth token" });
    expect(readProvisioningJwtFile(await file(without("cht")))).toEqual({ ok: false, reason: "no auth token" });
    expect(readProvisioningJwtFile(await file(without("chu")))).toEqual({ ok: false, reason: "no srv domain or urls" });
    expect(readProvisioningJwtFile(await file({ ...JWT_PROV, chsrv: "example.net" }))).toEqual({ ok: false, reason: "both srv domain and URLs supplied" });
    expect(readProvisioningJwtFile(await file({ ...without("chu"), chsrv: "example.net" }))).toMatchObject({ ok: true, settings: { srvDomain: "example.net" } });
  });

  it("needs sub or purpose choria_provisioning, and not iss, ou or extensions (as Go)", async () => {
    expect(readProvisioningJwtFile(await file(without("sub", "purpose")))).toEqual({ ok: false, reason: "token is not a provisioning token" });
    expect(readProvisioningJwtFile(await file(without("purpose")))).toMatchObject({ ok: true });
    expect(readProvisioningJwtFile(await file(without("sub")))).toMatchObject({ ok: true });
    expect(readProvisioningJwtFile(await file(without("iss", "ou", "extensions")))).toMatchObject({ ok: true });
  });

  it("refuses what golang-jwt's ParseUnverified refuses, and nothing it verifies later", async () => {
    const header = (value: object) => encodeBase64Url(JSON.stringify(value));
    const body = encodeBase64Url(JSON.stringify(JWT_PROV));
    const hmac = `${header({ alg: "HS256", typ: "JWT" })}.${body}`;

    expect(readProvisioningJwtFile("this is not a JWT")).toMatchObject({ ok: false, reason: expect.stringMatching(/invalid number of segments/) });
    expect(readProvisioningJwtFile(`${header({ typ: "JWT" })}.${body}.`)).toMatchObject({ ok: false, reason: expect.stringMatching(/alg\) is unspecified/) });
    expect(readProvisioningJwtFile(`${header({ alg: "XS1" })}.${body}.`)).toMatchObject({ ok: false, reason: expect.stringMatching(/alg\) is unavailable/) });
    expect(readProvisioningJwtFile(await file({ ...JWT_PROV, chpd: "yes" }))).toMatchObject({ ok: false, reason: expect.stringMatching(/malformed/) });
    expect(readProvisioningJwtFile(`${await file(JWT_PROV)} `)).toMatchObject({ ok: false, reason: expect.stringMatching(/malformed/) });
    // Unverified: an HMAC, expired or foreign-signed token still configures the node.
    expect(readProvisioningJwtFile(`${hmac}.${encodeBase64Url(createHmac("sha256", "k").update(hmac).digest())}`)).toMatchObject({ ok: true });
    expect(readProvisioningJwtFile(await file({ ...JWT_PROV, exp: 1 }))).toMatchObject({ ok: true });
  });
});
