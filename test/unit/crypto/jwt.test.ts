import { generateKeyPairSync, sign } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeJwt, loadJwtVerifier, ProvisioningJwtExpiredError, signJwt, verifyProvisioningJwt } from "../../../lib/crypto/jwt";
import { verifyJwtSignature } from "../../support/choria-node/jwt-signature";
import { ed25519SigningKey, generateEd25519Seed, rsaSigningKey } from "../../support/choria-node/keys";
import { helperJwtClaims, provisioningJwtExpiry } from "../../../lib/crypto/jwt-claims";
import { loadSigningKey, type SigningKey } from "../../../lib/crypto/keys";
import { mintProvisioningJwt } from "../../support/choria-node/server-jwt";
import { JwtError } from "../../../lib/errors";

const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
const rsaKey = rsaSigningKey(rsa.privateKey);
const edKey = ed25519SigningKey(generateEd25519Seed());
const otherEdKey = ed25519SigningKey(generateEd25519Seed());
const edHex = (key: SigningKey) => (key.alg === "EdDSA" ? key.publicKeyHex : "");
const dir = mkdtempSync(join(tmpdir(), "crypto-jwt-"));
const file = (name: string, content: string | Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const NOW = new Date("2025-06-01T12:00:00Z");
const NOW_S = NOW.getTime() / 1000;
const base = { cht: "tok", chs: true, chu: "nats://b:4222", chpd: true, purpose: "choria_provisioning" };

function b64(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

function handSigned(alg: string, claims: object, signer: (input: Buffer) => Buffer): string {
  const input = `${b64({ alg, typ: "JWT" })}.${b64(claims)}`;
  return `${input}.${signer(Buffer.from(input)).toString("base64url")}`;
}

describe("loadJwtVerifier", () => {
  it("treats a value that is not a path as hex ed25519", async () => {
    const verifier = await loadJwtVerifier(edHex(edKey));

    expect(verifier.kind).toBe("ed25519");
    expect(await verifyProvisioningJwt(await mintProvisioningJwt(base, edKey), verifier, NOW)).toMatchObject({ cht: "tok" });
  });

  it("reads PKIX RSA public keys and hex ed25519 files", async () => {
    const pkix = file("rsa.pem", rsa.publicKey.export({ format: "pem", type: "spki" }) as string);
    const hexFile = file("ed.public", edHex(edKey));

    expect((await loadJwtVerifier(pkix)).kind).toBe("rsa");
    expect((await loadJwtVerifier(hexFile)).kind).toBe("ed25519");
  });

  it.each([
    ["", /no JWT verification certificate configured/],
    ["not-hex-and-no-file", /could not parse ed25519 public data/],
    ["abcd", /invalid ed25519 public key size/],
  ])("rejects the value %j", async (value, reason) => {
    await expect(loadJwtVerifier(value)).rejects.toThrow(reason);
  });

  it("does not trim a hex file: a trailing newline fails", async () => {
    const path = file("newline.public", `${edHex(edKey)}\n`);

    await expect(loadJwtVerifier(path)).rejects.toThrow(/could not parse ed25519 public data/);
  });

  it("rejects PEM files that are not RSA public keys or do not parse", async () => {
    const ecPem = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "pem", type: "spki" }) as string;
    const ec = file("ec.pem", ecPem);
    const broken = file("broken.pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n");

    await expect(loadJwtVerifier(ec)).rejects.toThrow(/not a valid RSA public key/);
    await expect(loadJwtVerifier(broken)).rejects.toThrow(/could not parse validation certificate/);
  });

  it("reports an unreadable path", async () => {
    await expect(loadJwtVerifier(dir)).rejects.toThrow(/could not read validation certificate/);
  });
});

describe("verifyProvisioningJwt", () => {
  const rsaVerifier = { kind: "rsa" as const, publicKey: rsa.publicKey };
  const edVerifier = { kind: "ed25519" as const, publicKey: edKey.publicKey };

  it("accepts RS256, RS384 and RS512", async () => {
    for (const [alg, digest] of [["RS256", "sha256"], ["RS384", "sha384"], ["RS512", "sha512"]] as const) {
      const token = handSigned(alg, base, (input) => sign(digest, input, rsa.privateKey));

      expect((await verifyProvisioningJwt(token, rsaVerifier, NOW)).cht).toBe("tok");
    }
  });

  it("rejects HS256 and alg none even with a matching secret", async () => {
    const hs = handSigned("HS256", base, () => Buffer.alloc(32));
    const none = `${b64({ alg: "none" })}.${b64(base)}.`;

    await expect(verifyProvisioningJwt(hs, rsaVerifier, NOW)).rejects.toThrow(/signing method HS256 is invalid/);
    await expect(verifyProvisioningJwt(none, edVerifier, NOW)).rejects.toThrow(/signing method none is invalid/);
  });

  it("requires the key type to match the algorithm", async () => {
    await expect(verifyProvisioningJwt(await mintProvisioningJwt(base, rsaKey), edVerifier, NOW)).rejects.toThrow(/rsa public key required/);
    await expect(verifyProvisioningJwt(await mintProvisioningJwt(base, edKey), rsaVerifier, NOW)).rejects.toThrow(/ed25519 public key required/);
  });

  it("rejects a token signed by another key", async () => {
    const token = await mintProvisioningJwt(base, otherEdKey);

    await expect(verifyProvisioningJwt(token, edVerifier, NOW)).rejects.toThrow(/token signature is invalid/);
  });

  it("enforces exp and nbf without leeway", async () => {
    const expiresNow = await mintProvisioningJwt({ ...base, exp: NOW_S }, edKey);
    const expiresLater = await mintProvisioningJwt({ ...base, exp: NOW_S + 1 }, edKey);
    const startsNow = await mintProvisioningJwt({ ...base, nbf: NOW_S }, edKey);
    const startsLater = await mintProvisioningJwt({ ...base, nbf: NOW_S + 1 }, edKey);

    await expect(verifyProvisioningJwt(expiresNow, edVerifier, NOW)).rejects.toThrow(/token is expired/);
    await expect(verifyProvisioningJwt(expiresLater, edVerifier, NOW)).resolves.toMatchObject({ exp: NOW_S + 1 });
    await expect(verifyProvisioningJwt(startsNow, edVerifier, NOW)).resolves.toMatchObject({ nbf: NOW_S });
    await expect(verifyProvisioningJwt(startsLater, edVerifier, NOW)).rejects.toThrow(/not valid yet/);
  });

  it("accepts purpose or sub as the provisioning marker, nothing else", async () => {
    const bySub = await mintProvisioningJwt({ ...base, purpose: undefined, sub: "choria_provisioning" }, edKey);
    const neither = await mintProvisioningJwt({ ...base, purpose: "choria_server" }, edKey);

    await expect(verifyProvisioningJwt(bySub, edVerifier, NOW)).resolves.toMatchObject({ sub: "choria_provisioning", ou: "choria" });
    await expect(verifyProvisioningJwt(neither, edVerifier, NOW)).rejects.toThrow(/^not a provisioning token$/);
  });

  it("applies the trust chain rules when tcs is set", async () => {
    const chain = { ...base, tcs: "abc", iss: "C-id.pk" };
    const okToken = await mintProvisioningJwt({ ...chain, issexp: NOW_S + 60 }, edKey);
    const wrongIssuer = await mintProvisioningJwt({ ...chain, iss: "I-pk", issexp: NOW_S + 60 }, edKey);
    const noIssuerExpiry = await mintProvisioningJwt(chain, edKey);
    const issuerExpired = await mintProvisioningJwt({ ...chain, issexp: NOW_S - 1 }, edKey);

    await expect(verifyProvisioningJwt(okToken, edVerifier, NOW)).resolves.toMatchObject({ tcs: "abc" });
    await expect(verifyProvisioningJwt(wrongIssuer, edVerifier, NOW)).rejects.toThrow(/chain issuer \(C-\)/);
    await expect(verifyProvisioningJwt(noIssuerExpiry, edVerifier, NOW)).rejects.toThrow(/issuer expiry/);
    await expect(verifyProvisioningJwt(issuerExpired, edVerifier, NOW)).rejects.toThrow(/chain issuer has expired/);
  });

  it.each([
    ["two segments", "a.b"],
    ["bad base64", "a*.b.c"],
    ["non-object claims", `${b64({ alg: "EdDSA" })}.${b64([1])}.AA`],
  ])("rejects a malformed token (%s) as JwtError", async (_name, token) => {
    await expect(verifyProvisioningJwt(token, edVerifier, NOW)).rejects.toThrow(JwtError);
  });

  it("rejects wrongly typed claims", async () => {
    for (const claims of [{ ...base, chs: "yes" }, { ...base, cht: 1 }, { ...base, exp: "soon" }, { ...base, aud: [1] }, { ...base, extensions: 3 }]) {
      const token = await signJwt(claims, edKey);

      await expect(verifyProvisioningJwt(token, edVerifier, NOW)).rejects.toThrow(/token is malformed/);
    }
  });

  // go-choria's jwt action sends provisioning.jwt byte for byte, and golang-jwt decodes each segment
  // with Go's RawURLEncoding, which skips CR and LF wherever they occur; the signature still covers
  // the header and claims exactly as they were sent.
  it("accepts a token file ending in a newline or CRLF, as Go's base64 decoder skips them", async () => {
    const token = await mintProvisioningJwt(base, edKey);

    expect(await verifyProvisioningJwt(`${token}\n`, edVerifier, NOW)).toMatchObject({ cht: "tok" });
    expect(await verifyProvisioningJwt(`${token}\r\n`, edVerifier, NOW)).toMatchObject({ cht: "tok" });
    expect(await verifyProvisioningJwt(`${token}\n`, rsaVerifier, NOW).catch((error: Error) => error.message)).toMatch(/ed25519 public key required/);
  });

  it("accepts no other whitespace than Go does", async () => {
    const token = await mintProvisioningJwt(base, edKey);
    const [header, claims] = token.split(".") as [string, string];

    for (const padded of [`${token} `, `${token}\t`, ` ${token}`, `${token}\n\u000b`]) {
      await expect(verifyProvisioningJwt(padded, edVerifier, NOW)).rejects.toThrow(/token is malformed/);
    }
    // A newline inside the signed part decodes, but the signature covers the bytes as sent.
    await expect(verifyProvisioningJwt(token.replace(`${header}.`, `${header}\n.`), edVerifier, NOW)).rejects.toThrow(/signature is invalid/);
    await expect(verifyProvisioningJwt(token.replace(`.${claims}`, `.${claims}\r\n`), edVerifier, NOW)).rejects.toThrow(/signature is invalid/);
  });

  it("keeps the raw claims and never puts the token in the error", async () => {
    const token = await mintProvisioningJwt({ ...base, extensions: { a: 1 }, chpwd: "hunter2", aud: ["x"] }, edKey);
    const claims = await verifyProvisioningJwt(token, edVerifier, NOW);
    const failure = await verifyProvisioningJwt(token, rsaVerifier, NOW).catch((error: Error) => error);

    expect(claims.raw).toEqual(decodeJwt(token).claims);
    expect(claims.extensions).toEqual({ a: 1 });
    expect((failure as Error).message).not.toContain("hunter2");
    expect((failure as Error).message).not.toContain(token.split(".")[1]);
  });
});

describe("helperJwtClaims", () => {
  it("renders Go's field order and omitempty rules", async () => {
    const token = await mintProvisioningJwt({ cht: "t", chs: false, chpd: false, sub: "choria_provisioning", exp: NOW_S + 10, v2: false }, edKey);
    const claims = await verifyProvisioningJwt(token, { kind: "ed25519", publicKey: edKey.publicKey }, NOW);

    const rendered = helperJwtClaims(claims);

    expect(Object.keys(rendered)).toEqual(["cht", "chs", "chpd", "extensions", "ou", "purpose", "sub", "exp"]);
    expect(rendered).toEqual({ cht: "t", chs: false, chpd: false, extensions: null, ou: "choria", purpose: "", sub: "choria_provisioning", exp: NOW_S + 10 });
  });
});

describe("signing keys", () => {
  it("loads PKCS#1 and PKCS#8 RSA PEM as RS256 and a 64-byte hex seed as EdDSA", () => {
    const pkcs1 = rsa.privateKey.export({ format: "pem", type: "pkcs1" }) as string;
    const pkcs8 = rsa.privateKey.export({ format: "pem", type: "pkcs8" }) as string;
    const seed = generateEd25519Seed();

    expect(loadSigningKey(pkcs1, "a.pem").alg).toBe("RS256");
    expect(loadSigningKey(Buffer.from(pkcs8), "b.pem").alg).toBe("RS256");
    expect(loadSigningKey(Buffer.from(seed).toString("hex"), "c.seed")).toMatchObject({ alg: "EdDSA", publicKeyHex: edHex(ed25519SigningKey(seed)) });
  });

  it.each([
    [`${"ab".repeat(32)}\n`, /unsupported key in k.seed/],
    ["x".repeat(64), /invalid ed25519 seed in k.seed/],
    ["-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", /could not parse signing key in k.seed/],
    [generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }) as string, /not a valid RSA private key/],
  ])("rejects unusable key content %#", (content, reason) => {
    expect(() => loadSigningKey(content, "k.seed")).toThrow(reason);
  });

  it("rsaSigningKey refuses non-RSA keys", () => {
    expect(() => rsaSigningKey(edKey.privateKey)).toThrow(JwtError);
  });

  it("signJwt writes the header {alg, typ} and claims in insertion order", async () => {
    const token = await signJwt({ b: 1, a: 2 }, rsaKey);
    const [header, payload] = token.split(".") as [string, string];

    expect(Buffer.from(header, "base64url").toString()).toBe('{"alg":"RS256","typ":"JWT"}');
    expect(Buffer.from(payload, "base64url").toString()).toBe('{"b":1,"a":2}');
    expect(verifyJwtSignature(token, rsa.publicKey.export({ format: "pem", type: "spki" }) as string)).toEqual({ b: 1, a: 2 });
  });
});

describe("verifyJwtSignature", () => {
  it("accepts KeyObjects (public or private), PEM and hex keys", async () => {
    const edToken = await signJwt({ x: 1 }, edKey);
    const rsaToken = await signJwt({ x: 2 }, rsaKey);

    expect(verifyJwtSignature(edToken, edHex(edKey))).toEqual({ x: 1 });
    expect(verifyJwtSignature(edToken, edKey.privateKey)).toEqual({ x: 1 });
    expect(verifyJwtSignature(rsaToken, rsa.publicKey)).toEqual({ x: 2 });
  });

  it("fails on a tampered payload", async () => {
    const [header, , signature] = (await signJwt({ x: 1 }, edKey)).split(".");

    expect(() => verifyJwtSignature(`${header}.${b64({ x: 2 })}.${signature}`, edKey.publicKey)).toThrow(/signature is invalid/);
  });
});

describe("the expiry of a provisioning JWT (the bootstrap expiry forecast)", () => {
  it("is its exp with its issuer, or a chain-signed token's issexp when that comes first, and none without either", () => {
    expect(provisioningJwtExpiry({ iss: "Choria Tokens Package", exp: NOW_S + 60 })).toEqual({ issuer: "Choria Tokens Package", expiresAt: (NOW_S + 60) * 1000 });
    expect(provisioningJwtExpiry({ exp: NOW_S + 60 })).toEqual({ issuer: "", expiresAt: (NOW_S + 60) * 1000 });
    expect(provisioningJwtExpiry({ iss: "C-id.pk", tcs: "abc", issexp: NOW_S + 30, exp: NOW_S + 60 })).toEqual({ issuer: "C-id.pk", expiresAt: (NOW_S + 30) * 1000 });
    // issexp means nothing without a chain signature: Go checks it only then.
    expect(provisioningJwtExpiry({ issexp: NOW_S + 30, exp: NOW_S + 60 })).toEqual({ issuer: "", expiresAt: (NOW_S + 60) * 1000 });
    expect(provisioningJwtExpiry({ iss: "no-expiry" })).toBeUndefined();
  });

  it("comes with the refusal of an authentic token that has expired, and only of one", async () => {
    const edVerifier = await loadJwtVerifier(edHex(edKey));
    const expired = await mintProvisioningJwt({ ...base, iss: "image-2024", exp: NOW_S }, edKey);
    const chainExpired = await mintProvisioningJwt({ ...base, tcs: "abc", iss: "C-id.pk", issexp: NOW_S - 1, exp: NOW_S + 60 }, edKey);
    const forged = await mintProvisioningJwt({ ...base, iss: "image-2024", exp: NOW_S - 1 }, otherEdKey);
    const notYetValid = await mintProvisioningJwt({ ...base, nbf: NOW_S + 60, exp: NOW_S + 120 }, edKey);
    const notProvisioning = await mintProvisioningJwt({ cht: "tok", exp: NOW_S - 1 }, edKey);
    const refusal = (token: string) => verifyProvisioningJwt(token, edVerifier, NOW).then(() => undefined, (error: unknown) => error);

    // Valid while now < exp: at exp it has expired.
    const atExp = await refusal(expired);
    expect(atExp).toBeInstanceOf(ProvisioningJwtExpiredError);
    expect((atExp as ProvisioningJwtExpiredError).expiry).toEqual({ issuer: "image-2024", expiresAt: NOW.getTime() });
    expect((atExp as Error).message).toBe("could not parse provisioner token: token has invalid claims: token is expired");
    expect(((await refusal(chainExpired)) as ProvisioningJwtExpiredError).expiry).toEqual({ issuer: "C-id.pk", expiresAt: (NOW_S - 1) * 1000 });
    for (const token of [forged, notYetValid, notProvisioning]) {
      const error = await refusal(token);
      expect(error).toBeInstanceOf(JwtError);
      expect(error).not.toBeInstanceOf(ProvisioningJwtExpiredError);
    }
  });
});
