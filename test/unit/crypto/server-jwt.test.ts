import { generateKeyPairSync, sign } from "node:crypto";
import { describe, expect, it } from "vitest";
import { addChainIssuerData, buildServerClaims, serverJwtSettings } from "../../../lib/crypto/server-jwt";
import { decodeJwt, signJwt } from "../../../lib/crypto/jwt";
import { verifyJwtSignature } from "../../support/choria-node/jwt-signature";
import { ed25519SigningKey, generateEd25519Seed, rsaSigningKey } from "../../support/choria-node/keys";
import { ksuidTime } from "../../support/choria-node/ksuid";
import { mintChainIssuerToken, verifyChainedServerJwt } from "../../support/choria-node/server-jwt";
import type { SigningKey } from "../../../lib/crypto/keys";

const hexOf = (key: SigningKey) => (key.alg === "EdDSA" ? key.publicKeyHex : "");
const org = ed25519SigningKey(generateEd25519Seed());
const provisioner = ed25519SigningKey(generateEd25519Seed());
const node = ed25519SigningKey(generateEd25519Seed());
const NOW = new Date("2025-06-01T12:00:00.750Z");
const NOW_S = Math.floor(NOW.getTime() / 1000);
const DAY_MS = 86_400_000;
const YEAR_MS = 365 * DAY_MS;

function claimsFor(validityMs = DAY_MS) {
  return buildServerClaims({ identity: "n1.example.net", publicKeyHex: hexOf(node), collectives: ["c1"], validityMs, now: NOW });
}

async function expectRejected(token: Promise<string>, reason: RegExp) {
  const resolved = await token;
  expect(() => verifyChainedServerJwt(resolved, hexOf(org), NOW)).toThrow(reason);
}

async function chainIssuerToken(exp = NOW_S + 10 * 86_400) {
  return mintChainIssuerToken({ orgIssuer: org, chainPublicKeyHex: hexOf(provisioner), now: NOW, exp });
}

describe("serverJwtSettings", () => {
  it("defaults to mcollective, org choria and the default validity", () => {
    expect(serverJwtSettings({}, null, YEAR_MS, NOW)).toEqual({
      org: "choria",
      collectives: ["mcollective"],
      validityMs: YEAR_MS,
      permissions: undefined,
      pubSubjects: undefined,
    });
  });

  it("switches to choria with the choria security provider, and the collectives item wins, split on commas without trimming", () => {
    expect(serverJwtSettings({ "plugin.security.provider": "choria" }, null, YEAR_MS, NOW).collectives).toEqual(["choria"]);
    expect(serverJwtSettings({ "plugin.security.provider": "choria", collectives: "a, b" }, null, YEAR_MS, NOW).collectives).toEqual(["a", " b"]);
  });

  it("lets server_claims override org, collectives, publish subjects, permissions and expiry", () => {
    const settings = serverJwtSettings(
      { collectives: "a" },
      { ou: "acme", collectives: ["x"], pub_subjects: ["reg.>"], permissions: { streams: true, governor: false }, exp: NOW_S + 7200 },
      YEAR_MS,
      NOW,
    );

    expect(settings).toEqual({
      org: "acme",
      collectives: ["x"],
      pubSubjects: ["reg.>"],
      permissions: { streams: true },
      validityMs: (NOW_S + 7200) * 1000 - NOW.getTime(),
    });
  });

  it("ignores empty overrides and falls back to the default validity at one hour or less", () => {
    const oneHour = serverJwtSettings({}, { ou: "", collectives: [], pub_subjects: [], exp: NOW.getTime() / 1000 + 3600 }, YEAR_MS, NOW);
    const durationMistake = serverJwtSettings({}, { exp: 157_680_000 }, YEAR_MS, NOW);

    expect(oneHour).toMatchObject({ org: "choria", collectives: ["mcollective"], validityMs: YEAR_MS, pubSubjects: undefined });
    expect(durationMistake.validityMs).toBe(YEAR_MS);
  });
});

describe("buildServerClaims", () => {
  it("produces Go's claim order and times", () => {
    const claims = buildServerClaims({
      identity: "n1",
      publicKeyHex: hexOf(node).toUpperCase(),
      collectives: ["c1", "c2"],
      permissions: { submission: true, streams: false },
      pubSubjects: ["x.>"],
      org: "acme",
      validityMs: DAY_MS + 1500,
      now: NOW,
    });

    expect(Object.keys(claims)).toEqual(["identity", "collectives", "permissions", "ou", "pub_subjects", "purpose", "public_key", "iss", "exp", "nbf", "iat", "jti"]);
    expect(claims).toMatchObject({ permissions: { submission: true }, ou: "acme", purpose: "choria_server", public_key: hexOf(node), iss: "Choria Provisioner" });
    expect(claims.iat).toBe(NOW_S);
    expect(claims.nbf).toBe(NOW_S);
    expect(claims.exp).toBe(NOW_S + 86_401);
    expect(ksuidTime(claims.jti).getTime()).toBe(NOW_S * 1000);
  });

  it.each([
    [{ identity: "" }, /identity is required/],
    [{ collectives: [] }, /at least one collective/],
    [{ publicKeyHex: "" }, /public key is required/],
    [{ publicKeyHex: "zz" }, /not hex encoded/],
    [{ validityMs: 0 }, /validity is required/],
  ])("rejects %j", (override, reason) => {
    expect(() => buildServerClaims({ identity: "n", publicKeyHex: "ab", collectives: ["c"], validityMs: DAY_MS, now: NOW, ...override })).toThrow(reason);
  });
});

describe("addChainIssuerData and verifyChainedServerJwt", () => {
  it("builds a chain that verifies against the org issuer key", async () => {
    const issuerToken = await chainIssuerToken();
    const issuer = decodeJwt(issuerToken).claims;

    const chained = addChainIssuerData(claimsFor(), issuerToken, provisioner);
    const token = await signJwt(chained, provisioner);

    expect(chained.iss).toBe(`C-${issuer.jti}.${hexOf(provisioner)}`);
    expect(chained.issexp).toBe(issuer.exp);
    expect(chained.exp).toBe(NOW_S + 86_400);
    expect(chained.tcs?.startsWith(`${issuer.tcs}.`)).toBe(true);
    expect(Object.keys(chained)).toEqual(["identity", "collectives", "ou", "purpose", "tcs", "public_key", "issexp", "iss", "exp", "nbf", "iat", "jti"]);
    expect(verifyJwtSignature(issuerToken, hexOf(org)).purpose).toBe("choria_client_id");
    expect(verifyChainedServerJwt(token, hexOf(org), NOW)).toMatchObject({ identity: "n1.example.net", collectives: ["c1"] });
  });

  it("caps exp at the chain issuer's expiry", async () => {
    const chained = addChainIssuerData(claimsFor(YEAR_MS), await chainIssuerToken(NOW_S + 7200), provisioner);

    expect(chained.exp).toBe(NOW_S + 7200);
    expect(chained.issexp).toBe(NOW_S + 7200);
  });

  it("refuses provisioner tokens without the chain claims, and non-ed25519 keys", async () => {
    const rsaKey = rsaSigningKey(generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey);
    const without = (claims: object) => signJwt(claims, provisioner);
    const full = { jti: "id", public_key: hexOf(provisioner), exp: NOW_S + 100, tcs: "ab" };

    expect(() => addChainIssuerData(claimsFor(), "x", rsaKey)).toThrow(/must be an ed25519 seed/);
    expect(() => addChainIssuerData(claimsFor(), "not a jwt", provisioner)).toThrow(/malformed/);
    for (const [missing, reason] of [
      ["tcs", /^no Trust Chain Signature claim in JWT Signing Token$/],
      ["jti", /^id not set$/],
      ["public_key", /^public key not set$/],
      ["exp", /^issuer has no expiry$/],
    ] as const) {
      const token = await without({ ...full, [missing]: undefined });
      expect(() => addChainIssuerData(claimsFor(), token, provisioner)).toThrow(reason);
    }
    const dottedId = await without({ ...full, jti: "a.b" });
    expect(() => addChainIssuerData(claimsFor(), dottedId, provisioner)).toThrow(/invalid issuer data/);
  });

  it("rejects chains signed by another org, tampered tcs, and expired issuers", async () => {
    const token = await signJwt(addChainIssuerData(claimsFor(), await chainIssuerToken(), provisioner), provisioner);
    const otherOrg = ed25519SigningKey(generateEd25519Seed());
    const claims = decodeJwt(token).claims;
    const resign = (override: object) => signJwt({ ...claims, ...override }, provisioner);
    const [orgSig, chainSig] = String(claims.tcs).split(".") as [string, string];

    expect(() => verifyChainedServerJwt(token, hexOf(otherOrg), NOW)).toThrow(/not signed by org issuer/);
    await expectRejected(resign({ tcs: `${orgSig}.${"00".repeat(64)}` }), /invalid chain signature/);
    await expectRejected(resign({ tcs: orgSig }), /invalid trust chain signature/);
    await expectRejected(resign({ tcs: `${orgSig}.zz` }), /invalid signature in chain signature/);
    await expectRejected(resign({ issexp: undefined }), /no issuer expires set/);
    await expectRejected(resign({ iat: NOW_S + 1 }), /id is not based on issued time/);
    await expectRejected(resign({ jti: "bad" }), /invalid ksuid format/);
    await expectRejected(resign({ iss: "C-onlyid" }), /invalid issuer content/);
    await expectRejected(resign({ purpose: "choria_client_id" }), /not a server token/);
    expect(() => verifyChainedServerJwt(token, hexOf(org), new Date((NOW_S + 86_400) * 1000))).toThrow(/token is expired/);
    await expectRejected(signJwt(claims, node), /signature is invalid/);
    expect(chainSig).toMatch(/^[0-9a-f]{128}$/);
  });

  it("reports each missing required chain claim", async () => {
    const claims = decodeJwt(await signJwt(addChainIssuerData(claimsFor(), await chainIssuerToken(), provisioner), provisioner)).claims;
    for (const [name, reason] of [
      ["public_key", /no public key set/],
      ["tcs", /no trust chain signature set/],
      ["jti", /id not set/],
      ["iat", /no issued time set/],
      ["exp", /no expires set/],
    ] as const) {
      const token = await signJwt({ ...claims, [name]: undefined }, provisioner);
      expect(() => verifyChainedServerJwt(token, hexOf(org), NOW)).toThrow(reason);
    }
  });

  it("verifies an unchained EdDSA server token directly with the given key, and refuses RS256", async () => {
    const direct = await signJwt(claimsFor(), org);
    const rsaToken = `${Buffer.from('{"alg":"RS256","typ":"JWT"}').toString("base64url")}.e30.${sign("sha256", Buffer.from("x"), generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey).toString("base64url")}`;

    expect(verifyChainedServerJwt(direct, hexOf(org), NOW).iss).toBe("Choria Provisioner");
    expect(() => verifyChainedServerJwt(rsaToken, hexOf(org), NOW)).toThrow(/ed25519 public key required/);
    expect(() => verifyChainedServerJwt(direct, "abc", NOW)).toThrow(/org issuer public key/);
  });

  it("mintChainIssuerToken needs an ed25519 org key and sets a KSUID of iat", async () => {
    const rsaKey = rsaSigningKey(generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey);
    const claims = decodeJwt(await chainIssuerToken()).claims;

    await expect(mintChainIssuerToken({ orgIssuer: rsaKey, chainPublicKeyHex: "ab", exp: 1 })).rejects.toThrow(/must be ed25519/);
    expect(ksuidTime(String(claims.jti)).getTime()).toBe(Number(claims.iat) * 1000);
    expect(claims.iss).toBe(`I-${hexOf(org)}`);
  });
});
