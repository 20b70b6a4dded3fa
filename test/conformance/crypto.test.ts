import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { addChainIssuerData, buildServerClaims } from "../../lib/crypto/server-jwt";
import { decodeJwt, loadJwtVerifier, signJwt, verifyProvisioningJwt } from "../../lib/crypto/jwt";
import { verifyJwtSignature } from "../support/choria-node/jwt-signature";
import { decryptLegacyPem } from "../support/choria-node/legacy-pem";
import { deriveLegacyPemKey } from "../../lib/crypto/legacy-pem-format";
import { ed25519SigningKey } from "../support/choria-node/keys";
import { encryptLegacyPem } from "../../lib/crypto/legacy-pem";
import { helperJwtClaims } from "../../lib/crypto/jwt-claims";
import { ksuid, replySubjectHash } from "../../lib/crypto/ids";
import { ksuidTime } from "../support/choria-node/ksuid";
import { loadSigningKey } from "../../lib/crypto/keys";
import { mintChainIssuerToken, verifyChainedServerJwt } from "../support/choria-node/server-jwt";
import { signNonce } from "../support/choria-node/nonce";
import { verifyNonceSignature } from "../../lib/crypto/nonce";
import { x25519PublicKey } from "../support/choria-node/ecdh";
import { x25519SharedSecret } from "../../lib/crypto/ecdh";
import { JwtError } from "../../lib/errors";

const FIXTURES = join(__dirname, "../../../shared/fixtures/choria");
const fixturePath = (path: string) => join(FIXTURES, path);
const fixture = (path: string) => readFileSync(fixturePath(path), "utf8");
const hex = (text: string) => new Uint8Array(Buffer.from(text, "hex"));

interface KsuidVector {
  ksuid: string;
  unix_seconds: number;
  payload_hex: string;
}
const vectors = JSON.parse(fixture("generated/crypto-vectors.json")) as {
  x25519: Record<string, string>;
  legacy_pem_encryption: Record<string, string>;
  ed25519_nonce_signature: Record<string, string>;
  reply_subject_md5: Record<string, string>;
  ksuid: { example: KsuidVector; J1: KsuidVector; J2: KsuidVector };
  org_issuer_chain: Record<string, string>;
  rs256_server_jwt: Record<string, string>;
};

// A fixed instant after every fixture token's nbf and before their exp (where they have one).
const NOW = new Date("2024-01-01T00:00:00Z");

describe("crypto-vectors.json", () => {
  it("reproduces the X25519 vector from both sides", () => {
    const v = vectors.x25519;
    const serverPrivate = hex(v.server_private as string);
    const provisionerPrivate = hex(v.provisioner_private as string);

    expect(Buffer.from(x25519PublicKey(serverPrivate)).toString("hex")).toBe(v.server_public);
    expect(Buffer.from(x25519PublicKey(provisionerPrivate)).toString("hex")).toBe(v.provisioner_public);
    expect(Buffer.from(x25519SharedSecret(provisionerPrivate, hex(v.server_public as string))).toString("hex")).toBe(v.shared_secret);
    expect(Buffer.from(x25519SharedSecret(serverPrivate, hex(v.provisioner_public as string))).toString("hex")).toBe(v.shared_secret);
  });

  it("reproduces the legacy PEM encryption vector with its fixed IV and decrypts it", () => {
    const v = vectors.legacy_pem_encryption;
    const password = hex(v.password_hex as string);
    const plaintext = Buffer.from(v.plaintext_utf8 as string, "utf8");
    const inputPem = `-----BEGIN PRIVATE KEY-----\n${plaintext.toString("base64")}\n-----END PRIVATE KEY-----\n`;

    const pem = encryptLegacyPem(inputPem, password, hex(v.iv_hex as string));

    expect(Buffer.from(deriveLegacyPemKey(password, hex(v.salt_hex as string))).toString("hex")).toBe(v.derived_key_hex);
    expect(pem).toBe(v.pem);
    expect(Buffer.from(decryptLegacyPem(v.pem as string, password)).toString("utf8")).toBe(v.plaintext_utf8);
  });

  it("reproduces the Ed25519 nonce signature and verifies it", () => {
    const v = vectors.ed25519_nonce_signature;
    const seed = hex(fixture(v.seed_file as string));

    const signed = signNonce(seed, v.nonce as string);

    expect(signed).toEqual({ publicKeyHex: v.public_key, signatureHex: v.signature_hex });
    expect(() => verifyNonceSignature(v.public_key as string, v.nonce as string, v.signature_hex as string)).not.toThrow();
  });

  it("reproduces every md5 reply subject hash", () => {
    for (const [callerid, hash] of Object.entries(vectors.reply_subject_md5)) {
      expect(replySubjectHash(callerid)).toBe(hash);
    }
  });

  it("reproduces every KSUID vector and reads its time back", () => {
    const examples = [vectors.ksuid.example, vectors.ksuid.J1, vectors.ksuid.J2];

    for (const v of examples) {
      const date = new Date(v.unix_seconds * 1000);

      expect(ksuid(date, hex(v.payload_hex))).toBe(v.ksuid);
      expect(ksuidTime(v.ksuid)).toEqual(date);
    }
  });

  it("verifies the org issuer chain and its parts", () => {
    const v = vectors.org_issuer_chain;
    const clientClaims = verifyJwtSignature(v.provisioner_client_jwt as string, v.org_issuer_public as string);

    const claims = verifyChainedServerJwt(v.server_jwt as string, v.org_issuer_public as string, NOW);

    expect(clientClaims.tcs).toBe(v.provisioner_token_tcs);
    expect(clientClaims.iss).toBe(`I-${v.org_issuer_public}`);
    expect(verifyJwtSignature(v.server_jwt as string, v.provisioner_public as string).identity).toBe("ginkgo.example.net");
    expect(claims).toMatchObject({ identity: "ginkgo.example.net", collectives: ["choria"], iss: v.server_issuer, tcs: v.server_tcs });
  });

  it("rebuilds the org issuer chain byte for byte from the seeds", async () => {
    const v = vectors.org_issuer_chain;
    const orgIssuer = ed25519SigningKey(hex(fixture(v.org_issuer_seed_file as string)));
    const provisioner = loadSigningKey(fixture(v.provisioner_seed_file as string), v.provisioner_seed_file as string);
    const serverExample = decodeJwt(v.server_jwt as string).claims;

    const clientJwt = await mintChainIssuerToken({
      orgIssuer,
      chainPublicKeyHex: v.provisioner_public as string,
      now: new Date(vectors.ksuid.J1.unix_seconds * 1000),
      exp: 2_200_000_000,
      jtiRandom: hex(vectors.ksuid.J1.payload_hex),
    });
    const issuedAt = new Date(vectors.ksuid.J2.unix_seconds * 1000);
    const serverClaims = buildServerClaims({
      identity: "ginkgo.example.net",
      publicKeyHex: serverExample.public_key as string,
      collectives: ["choria"],
      validityMs: (2_100_000_000 - vectors.ksuid.J2.unix_seconds) * 1000,
      now: issuedAt,
      jtiRandom: hex(vectors.ksuid.J2.payload_hex),
    });
    const serverJwt = await signJwt(addChainIssuerData(serverClaims, clientJwt, provisioner), provisioner);

    expect(clientJwt).toBe(v.provisioner_client_jwt);
    expect(serverJwt).toBe(v.server_jwt);
  });

  it("verifies and rebuilds the RS256 server JWT with the provisioner RSA pair", async () => {
    const v = vectors.rs256_server_jwt;
    const key = loadSigningKey(fixture(v.signing_key as string), v.signing_key as string);
    const example = decodeJwt(v.jwt as string).claims;

    const rebuilt = await signJwt(
      buildServerClaims({
        identity: "ginkgo.example.net",
        publicKeyHex: example.public_key as string,
        collectives: ["one", "two"],
        validityMs: (2_100_000_000 - vectors.ksuid.J2.unix_seconds) * 1000,
        now: new Date(vectors.ksuid.J2.unix_seconds * 1000),
        jtiRandom: hex(vectors.ksuid.J2.payload_hex),
      }),
      key,
    );

    expect(verifyJwtSignature(v.jwt as string, fixture(v.verify_key as string))).toMatchObject({
      identity: "ginkgo.example.net",
      collectives: ["one", "two"],
      ou: "choria",
      iss: "Choria Provisioner",
    });
    expect(key.alg).toBe("RS256");
    expect(rebuilt).toBe(v.jwt);
  });
});

describe("jwt fixtures", () => {
  it("verifies the broker secure and insecure tokens with rip.mcollective.cert.pem", async () => {
    const verifier = await loadJwtVerifier(fixturePath("jwt/broker/rip.mcollective.cert.pem"));

    const secure = await verifyProvisioningJwt(fixture("jwt/broker/secure.jwt"), verifier, NOW);
    const insecure = await verifyProvisioningJwt(fixture("jwt/broker/insecure.jwt"), verifier, NOW);

    expect(verifier.kind).toBe("rsa");
    expect(secure).toMatchObject({ chs: true, cht: "toomanysecrets", sub: "choria_provisioning", ou: "choria" });
    expect(insecure.chs).toBe(false);
    expect(helperJwtClaims(secure)).toMatchObject({ purpose: "", ou: "choria", extensions: null });
  });

  it("rejects the broker invalid token with the certificate", async () => {
    const verifier = await loadJwtVerifier(fixturePath("jwt/broker/rip.mcollective.cert.pem"));

    await expect(verifyProvisioningJwt(fixture("jwt/broker/invalid.jwt"), verifier, NOW)).rejects.toThrow(/signature is invalid/);
  });

  it("rejects the HS256 provision-agent token by algorithm", async () => {
    const verifier = await loadJwtVerifier(fixturePath("jwt/broker/rip.mcollective.cert.pem"));

    const result = verifyProvisioningJwt(fixture("jwt/provision-agent/provision-hs256.jwt"), verifier, NOW);

    await expect(result).rejects.toBeInstanceOf(JwtError);
    await expect(result).rejects.toThrow(/signing method HS256 is invalid/);
  });

  it("verifies the ed25519 good token with signer.public (file and hex value) and not with other.public", async () => {
    // The fixture file ends in a newline; a node sends it byte for byte and Go accepts it.
    const token = fixture("jwt/tokens-ed25519/good-provisioning.jwt");
    expect(token.endsWith("\n")).toBe(true);
    const fromFile = await loadJwtVerifier(fixturePath("jwt/tokens-ed25519/signer.public"));
    const fromHex = await loadJwtVerifier(fixture("jwt/tokens-ed25519/signer.public"));
    const other = await loadJwtVerifier(fixturePath("jwt/tokens-ed25519/other.public"));

    expect(await verifyProvisioningJwt(token, fromFile, NOW)).toMatchObject({ cht: "x", purpose: "choria_provisioning", chrd: "," });
    expect((await verifyProvisioningJwt(token, fromHex, NOW)).iss).toBe("ginkgo");
    await expect(verifyProvisioningJwt(token, other, NOW)).rejects.toThrow(/signature is invalid/);
  });

  it("verifies the RSA good token with signer-public.pem, not with other-public.pem", async () => {
    const token = fixture("jwt/tokens-rsa/good-provisioning.jwt");
    const signer = await loadJwtVerifier(fixturePath("jwt/tokens-rsa/signer-public.pem"));
    const other = await loadJwtVerifier(fixturePath("jwt/tokens-rsa/other-public.pem"));

    expect(await verifyProvisioningJwt(token, signer, NOW)).toMatchObject({ cht: "toomanysecrets", chpd: false });
    await expect(verifyProvisioningJwt(token, other, NOW)).rejects.toThrow(/signature is invalid/);
  });

  it("needs the matching key type: the RSA token fails against an ed25519 verifier", async () => {
    const verifier = await loadJwtVerifier(fixturePath("jwt/tokens-ed25519/signer.public"));

    await expect(verifyProvisioningJwt(fixture("jwt/tokens-rsa/good-provisioning.jwt"), verifier, NOW)).rejects.toThrow(
      /rsa public key required/,
    );
  });

  it("signs a server JWT with keys/provisioner that verifies with its public half", async () => {
    const key = loadSigningKey(readFileSync(fixturePath("keys/provisioner/jwt-signer.pem")), "keys/provisioner/jwt-signer.pem");
    const nodeKey = ed25519SigningKey(new Uint8Array(32).fill(7));
    const claims = buildServerClaims({
      identity: "node1.example.net",
      publicKeyHex: nodeKey.alg === "EdDSA" ? nodeKey.publicKeyHex : "",
      collectives: ["mcollective"],
      validityMs: 86_400_000,
      now: NOW,
    });

    const token = await signJwt(claims, key);

    expect(verifyJwtSignature(token, fixture("keys/provisioner/jwt-signer-public.pem"))).toEqual(claims);
  });
});
