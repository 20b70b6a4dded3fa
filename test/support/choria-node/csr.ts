/**
 * The node's side of a CSR: gencsr's request and public key, and what a test reads back from a
 * request (the provisioner reads and judges CSRs in lib/crypto/csr-decode.ts and lib/crypto/csr.ts).
 */
import { createPublicKey, KeyObject, sign, verify } from "node:crypto";
import { decodeCsr } from "../../../lib/crypto/csr-decode";
import { TAG } from "../../../lib/crypto/der";
import { CsrError } from "../../../lib/errors";
import { bitString, derNull, octetString, oid, sequence, set, smallInteger, tlv } from "./der-writer";

const OID = {
  commonName: "2.5.4.3",
  country: "2.5.4.6",
  locality: "2.5.4.7",
  organization: "2.5.4.10",
  organizationalUnit: "2.5.4.11",
  extensionRequest: "1.2.840.113549.1.9.14",
  subjectAltName: "2.5.29.17",
  sha256WithRsa: "1.2.840.113549.1.1.11",
} as const;

const DNS_NAME_TAG = 0x82;
const ATTRIBUTES_TAG = 0xa0;
const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

export interface CsrInput {
  commonName: string;
  privateKey: KeyObject;
  dnsNames?: string[];
  country?: string;
  locality?: string;
  organization?: string;
  organizationalUnit?: string;
}

function directoryString(value: string): Uint8Array {
  return PRINTABLE.test(value) ? tlv(TAG.printableString, Buffer.from(value, "ascii")) : tlv(TAG.utf8String, Buffer.from(value, "utf8"));
}

function rdn(type: string, value: string): Uint8Array {
  return set(sequence(oid(type), directoryString(value)));
}

function toPem(label: string, der: Uint8Array): string {
  const body = Buffer.from(der).toString("base64").match(/.{1,64}/g)?.join("\n") ?? "";
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
}

/**
 * A PKCS#10 certificate request signed SHA256-RSA, as a node's gencsr makes it. Subject RDNs follow
 * Go's order (C, L, O, OU, CN); DNS names go into a subjectAltName extension request.
 */
export function createCsr(input: CsrInput): string {
  if (input.privateKey.type !== "private" || input.privateKey.asymmetricKeyType !== "rsa") {
    throw new CsrError("a CSR needs an RSA private key");
  }
  const subjectParts: Uint8Array[] = [];
  if (input.country) subjectParts.push(rdn(OID.country, input.country));
  if (input.locality) subjectParts.push(rdn(OID.locality, input.locality));
  if (input.organization) subjectParts.push(rdn(OID.organization, input.organization));
  if (input.organizationalUnit) subjectParts.push(rdn(OID.organizationalUnit, input.organizationalUnit));
  if (input.commonName) subjectParts.push(rdn(OID.commonName, input.commonName));

  const dnsNames = input.dnsNames ?? [];
  const attributes =
    dnsNames.length === 0
      ? []
      : [
          sequence(
            oid(OID.extensionRequest),
            set(sequence(sequence(oid(OID.subjectAltName), octetString(sequence(...dnsNames.map((name) => tlv(DNS_NAME_TAG, Buffer.from(name, "ascii")))))))),
          ),
        ];
  const spki = new Uint8Array(createPublicKey(input.privateKey).export({ format: "der", type: "spki" }));
  const info = sequence(smallInteger(0), sequence(...subjectParts), spki, tlv(ATTRIBUTES_TAG, Buffer.concat(attributes)));
  const signature = sign("sha256", info, input.privateKey);
  return toPem("CERTIFICATE REQUEST", sequence(info, sequence(oid(OID.sha256WithRsa), derNull()), bitString(signature)));
}

/** Subject common name and DNS SANs of a PEM CSR (signature not checked, as in Go). */
export function parseCsr(pem: string): { commonName: string; dnsNames: string[] } {
  const { commonName, dnsNames } = decodeCsr(pem);
  return { commonName, dnsNames };
}

/** Whether a SHA256-RSA CSR is signed by the key it carries (the provisioner itself never checks). */
export function verifyCsrSignature(pem: string): boolean {
  const csr = decodeCsr(pem);
  if (csr.signatureAlgorithm !== OID.sha256WithRsa) return false;
  const publicKey = createPublicKey({ key: Buffer.from(csr.spki.raw), format: "der", type: "spki" });
  return verify("sha256", csr.info.raw, publicKey, csr.signature);
}

/** gencsr's `public_key` quirk: the PKCS#1 RSAPublicKey DER under a "PUBLIC KEY" label. */
export function rsaPublicKeyPkcs1Pem(publicKey: KeyObject): string {
  const key = publicKey.type === "private" ? createPublicKey(publicKey) : publicKey;
  if (key.asymmetricKeyType !== "rsa") throw new CsrError("an RSA key is required");
  return toPem("PUBLIC KEY", new Uint8Array(key.export({ format: "der", type: "pkcs1" })));
}
