import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decryptLegacyPem } from "../../support/choria-node/legacy-pem";
import { EcdhError, NonceSignatureError } from "../../../lib/errors";
import { encryptLegacyPem } from "../../../lib/crypto/legacy-pem";
import { generateEd25519Seed } from "../../support/choria-node/keys";
import { generateX25519KeyPair, x25519SharedSecret } from "../../../lib/crypto/ecdh";
import { LegacyPemError } from "../../../lib/crypto/legacy-pem-format";
import { signNonce } from "../../support/choria-node/nonce";
import { uuidHex } from "../../../lib/crypto/ids";
import { verifyNonceSignature } from "../../../lib/crypto/nonce";
import { x25519PublicKey } from "../../support/choria-node/ecdh";

const pemOf = (label: string, der: Uint8Array) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der).toString("base64").match(/.{1,64}/g)?.join("\n") ?? ""}\n-----END ${label}-----\n`;

describe("X25519", () => {
  it("both sides of a fresh exchange agree on 32 bytes", () => {
    const server = generateX25519KeyPair();
    const provisioner = generateX25519KeyPair();

    const provisionerSide = x25519SharedSecret(provisioner.privateKey, server.publicKey);
    const serverSide = x25519SharedSecret(server.privateKey, provisioner.publicKey);

    expect(provisionerSide).toHaveLength(32);
    expect(Buffer.from(provisionerSide)).toEqual(Buffer.from(serverSide));
    expect(Buffer.from(x25519PublicKey(server.privateKey))).toEqual(Buffer.from(server.publicKey));
  });

  it("rejects a low-order peer key and wrong key sizes", () => {
    const { privateKey } = generateX25519KeyPair();

    expect(() => x25519SharedSecret(privateKey, new Uint8Array(32))).toThrow(EcdhError);
    expect(() => x25519SharedSecret(privateKey, new Uint8Array(31))).toThrow(/32 bytes/);
    expect(() => x25519SharedSecret(new Uint8Array(16), new Uint8Array(32).fill(9))).toThrow(/32 bytes/);
  });
});

describe("legacy PEM encryption", () => {
  it("round-trips any DER with any 32-byte password", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), (der, password) => {
        const encrypted = encryptLegacyPem(pemOf("PRIVATE KEY", der), password);

        expect(encrypted).toMatch(/^-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,[0-9a-f]{32}\n\n/);
        expect(Buffer.from(decryptLegacyPem(encrypted, password))).toEqual(Buffer.from(der));
      }),
      { numRuns: 100 },
    );
  });

  it("encrypts a real RSA key that decrypts back to the same PKCS#1 DER", () => {
    const key = generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey;
    const pem = key.export({ format: "pem", type: "pkcs1" }) as string;
    const password = x25519SharedSecret(generateX25519KeyPair().privateKey, generateX25519KeyPair().publicKey);

    const encrypted = encryptLegacyPem(pem, password);

    expect(encrypted.split("\n").filter((line) => line.length > 64)).toEqual([]);
    expect(Buffer.from(decryptLegacyPem(encrypted, password))).toEqual(key.export({ format: "der", type: "pkcs1" }));
  });

  it("is what OpenSSL opens and writes: Node's createPrivateKey reads it, and our decrypt reads Node's export", () => {
    // The hand-written part is only Go's EncryptPEMBlock framing (any DER re-labelled RSA PRIVATE KEY,
    // a caller-chosen IV); the cipher and the EVP_BytesToKey derivation are checked against OpenSSL here.
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const pkcs1 = privateKey.export({ format: "pem", type: "pkcs1" }).toString();
    const password = Buffer.alloc(32, 7);

    const opened = createPrivateKey({ key: encryptLegacyPem(pkcs1, password), format: "pem", passphrase: password });
    const byOpenSsl = privateKey.export({ format: "pem", type: "pkcs1", cipher: "aes-256-cbc", passphrase: password }).toString();

    expect(opened.export({ format: "der", type: "pkcs1" })).toEqual(privateKey.export({ format: "der", type: "pkcs1" }));
    expect(Buffer.from(decryptLegacyPem(byOpenSsl, password))).toEqual(privateKey.export({ format: "der", type: "pkcs1" }));
  });

  it("reports a wrong password like Go", () => {
    const password = new Uint8Array(32).fill(1);
    const wrong = new Uint8Array(32).fill(2);
    // A fixed IV whose wrong-password decryption is known to break the padding keeps this deterministic.
    const candidates = Array.from({ length: 16 }, (_, index) => encryptLegacyPem(pemOf("X", new Uint8Array(40).fill(index)), password, new Uint8Array(16).fill(index)));

    const failures = candidates.filter((pem) => {
      try {
        decryptLegacyPem(pem, wrong);
        return false;
      } catch (error) {
        return error instanceof LegacyPemError && /x509: decryption password incorrect/.test(error.message);
      }
    });

    expect(failures.length).toBeGreaterThan(0);
  });

  it.each([
    ["no PEM at all", "garbage", /no PEM block found/],
    ["an unencrypted block", pemOf("RSA PRIVATE KEY", new Uint8Array(16)), /no DEK-Info/],
    ["an unknown mode", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: DES-CBC,0001020304050607\n\nAAAA\n-----END RSA PRIVATE KEY-----\n", /unknown encryption mode DES-CBC/],
    ["a bad IV", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,zz\n\nAAAA\n-----END RSA PRIVATE KEY-----\n", /malformed DEK-Info IV/],
    ["a short IV", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,0011\n\nAAAA\n-----END RSA PRIVATE KEY-----\n", /incorrect IV size/],
    ["a partial block", `-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,${"00".repeat(16)}\n\nAAAA\n-----END RSA PRIVATE KEY-----\n`, /multiple of the block size/],
    ["invalid base64", "-----BEGIN X-----\n*&^\n-----END X-----\n", /invalid base64/],
  ])("decrypt rejects %s", (_name, pem, reason) => {
    expect(() => decryptLegacyPem(pem, new Uint8Array(32))).toThrow(reason);
  });

  it("encrypt rejects a wrong IV size and non-PEM input", () => {
    expect(() => encryptLegacyPem(pemOf("X", new Uint8Array(4)), new Uint8Array(32), new Uint8Array(8))).toThrow(/IV must be 16 bytes/);
    expect(() => encryptLegacyPem("not pem", new Uint8Array(32))).toThrow(LegacyPemError);
  });
});

describe("Ed25519 nonce signatures", () => {
  it("a signed nonce verifies, a different nonce does not", () => {
    const nonce = uuidHex();
    const { publicKeyHex, signatureHex } = signNonce(generateEd25519Seed(), nonce);

    expect(() => verifyNonceSignature(publicKeyHex, nonce, signatureHex)).not.toThrow();
    expect(() => verifyNonceSignature(publicKeyHex, uuidHex(), signatureHex)).toThrow(/^invalid nonce signature$/);
    expect(() => verifyNonceSignature(publicKeyHex.toUpperCase(), nonce, signatureHex.toUpperCase())).not.toThrow();
  });

  it.each([
    ["", "aa", /no public key received/],
    ["aa".repeat(32), "", /no signature received/],
    ["zz".repeat(32), "aa".repeat(64), /invalid public key: not hex/],
    ["aa".repeat(31), "aa".repeat(64), /invalid public key: expected 32 bytes, got 31/],
    ["aa".repeat(32), "a", /invalid signature: not hex/],
    ["aa".repeat(32), "aa".repeat(63), /invalid signature: expected 64 bytes/],
  ])("rejects key %j / signature %j", (publicKeyHex, signatureHex, reason) => {
    expect(() => verifyNonceSignature(publicKeyHex, "nonce", signatureHex)).toThrow(NonceSignatureError);
    expect(() => verifyNonceSignature(publicKeyHex, "nonce", signatureHex)).toThrow(reason);
  });

  it("signNonce refuses seeds that are not 32 bytes", () => {
    expect(() => signNonce(new Uint8Array(31), "n")).toThrow(/32 bytes/);
  });
});
