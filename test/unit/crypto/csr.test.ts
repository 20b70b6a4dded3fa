import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createCsr, parseCsr, rsaPublicKeyPkcs1Pem, verifyCsrSignature } from "../../support/choria-node/csr";
import { DEFAULT_CERT_DENY_LIST, validateCsr } from "../../../lib/crypto/csr";
import { children, decodeOid, readElement } from "../../../lib/crypto/der";
import { DerError, CsrError } from "../../../lib/errors";
import { oid, sequence, smallInteger } from "../../support/choria-node/der-writer";

const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const csrFor = (commonName: string, dnsNames?: string[]) => createCsr({ commonName, privateKey, dnsNames });

describe("createCsr / parseCsr", () => {
  it("writes a self-signed PKCS#10 request carrying CN, subject fields and DNS names", () => {
    const pem = createCsr({
      commonName: "node1.example.net",
      privateKey,
      dnsNames: ["node1", "alias.example.net"],
      country: "GB",
      locality: "Lo_ndon",
      organization: "Choria",
      organizationalUnit: "Ops",
    });

    expect(pem).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE REQUEST-----\n$/);
    expect(parseCsr(pem)).toEqual({ commonName: "node1.example.net", dnsNames: ["node1", "alias.example.net"] });
    expect(verifyCsrSignature(pem)).toBe(true);
  });

  it("omits the extension request without DNS names", () => {
    expect(parseCsr(csrFor("n1"))).toEqual({ commonName: "n1", dnsNames: [] });
  });

  it("detects a signature that does not match the request", () => {
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    const good = csrFor("n1");
    const swapped = createCsr({ commonName: "n1", privateKey: other });
    const der = Buffer.from(good.replace(/-----[A-Z ]+-----|\n/g, ""), "base64");
    const forged = Buffer.from(swapped.replace(/-----[A-Z ]+-----|\n/g, ""), "base64");
    // Same length keys give same-length signatures: splice the other key's signature onto this request.
    const tampered = Buffer.concat([der.subarray(0, der.length - 256), forged.subarray(forged.length - 256)]);

    expect(verifyCsrSignature(`-----BEGIN CERTIFICATE REQUEST-----\n${tampered.toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`)).toBe(false);
  });

  it("refuses non-RSA keys", () => {
    const ed = generateKeyPairSync("ed25519").privateKey;

    expect(() => createCsr({ commonName: "n", privateKey: ed })).toThrow(CsrError);
    expect(() => createCsr({ commonName: "n", privateKey: publicKey })).toThrow(/RSA private key/);
  });
});

describe("validateCsr", () => {
  it("accepts a CSR for the identity outside the deny list", () => {
    expect(() => validateCsr(csrFor("node1.example.net", ["node1.example.net"]), "node1.example.net", [...DEFAULT_CERT_DENY_LIST])).not.toThrow();
  });

  it.each([
    [undefined, /^no CSR received$/],
    ["", /^no CSR received$/],
    ["not a pem", /could not parse CSR/],
    ["-----BEGIN CERTIFICATE REQUEST-----\nMAMCAQA=\n-----END CERTIFICATE REQUEST-----", /could not parse CSR/],
    ["-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----", /could not parse CSR/],
  ])("rejects %j", (pem, reason) => {
    expect(() => validateCsr(pem, "n1", [])).toThrow(CsrError);
    expect(() => validateCsr(pem, "n1", [])).toThrow(reason);
  });

  it("requires the common name to equal the identity", () => {
    expect(() => validateCsr(csrFor("other"), "n1", [])).toThrow(/^common name other does not match identity n1$/);
  });

  it("tests the CN and every DNS name against the default deny list", () => {
    expect(() => validateCsr(csrFor("x.privileged.choria"), "x.privileged.choria", DEFAULT_CERT_DENY_LIST)).toThrow(
      /^x.privileged.choria matches denied certificate pattern$/,
    );
    expect(() => validateCsr(csrFor("n1", ["ok.net", "evil.mcollective"]), "n1", DEFAULT_CERT_DENY_LIST)).toThrow(
      /^evil.mcollective matches denied certificate pattern$/,
    );
    expect(() => validateCsr(csrFor("n1.choria.example"), "n1.choria.example", DEFAULT_CERT_DENY_LIST)).not.toThrow();
  });

  it("strips /re/ slashes, searches unanchored, and ignores patterns that do not compile", () => {
    expect(() => validateCsr(csrFor("web01.example"), "web01.example", ["//web\\d+//"])).toThrow(/matches denied/);
    expect(() => validateCsr(csrFor("aweb01b"), "aweb01b", ["web0"])).toThrow(/matches denied/);
    expect(() => validateCsr(csrFor("n/1"), "n/1", ["//"])).not.toThrow();
    expect(() => validateCsr(csrFor("n1"), "n1", ["(unclosed"])).not.toThrow();
  });
});

describe("rsaPublicKeyPkcs1Pem", () => {
  it("wraps PKCS#1 DER in a PUBLIC KEY label", () => {
    const pem = rsaPublicKeyPkcs1Pem(privateKey);
    const der = Buffer.from(pem.replace(/-----[A-Z ]+-----|\n/g, ""), "base64");

    expect(pem.startsWith("-----BEGIN PUBLIC KEY-----\n")).toBe(true);
    expect(der).toEqual(publicKey.export({ format: "der", type: "pkcs1" }));
    expect(createPublicKey({ key: der, format: "der", type: "pkcs1" }).equals(publicKey)).toBe(true);
    expect(() => rsaPublicKeyPkcs1Pem(generateKeyPairSync("ed25519").publicKey)).toThrow(CsrError);
  });
});

describe("der", () => {
  it("round-trips OIDs and long lengths", () => {
    const long = sequence(...Array.from({ length: 100 }, () => smallInteger(5)));

    expect(decodeOid(readElement(oid("1.2.840.113549.1.9.14")).node.content)).toBe("1.2.840.113549.1.9.14");
    expect(children(readElement(long).node.content)).toHaveLength(100);
  });

  it("rejects truncated and unsupported encodings", () => {
    expect(() => readElement(Uint8Array.of(0x30))).toThrow(DerError);
    expect(() => readElement(Uint8Array.of(0x30, 0x05, 0x00))).toThrow(/exceeds/);
    expect(() => readElement(Uint8Array.of(0x1f, 0x01, 0x00))).toThrow(/multi-byte tags/);
    expect(() => readElement(Uint8Array.of(0x30, 0x80))).toThrow(/unsupported DER length/);
    expect(() => smallInteger(200)).toThrow(DerError);
    expect(() => oid("1")).toThrow(DerError);
    expect(() => decodeOid(new Uint8Array(0))).toThrow(DerError);
  });
});
