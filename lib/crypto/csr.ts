import { createPublicKey, KeyObject, sign, verify } from "node:crypto";
import { CsrError } from "../errors";
import { bitString, children, decodeOid, derNull, octetString, oid, readElement, sequence, set, smallInteger, TAG, tlv, type DerNode } from "./der";

/** The provisioner's default `cert_deny_list`, the one definition lib/config uses too (the dots after "privileged" are unescaped upstream too). */
export const DEFAULT_CERT_DENY_LIST: readonly string[] = Object.freeze([
  "\\.privileged.mcollective$",
  "\\.privileged.choria$",
  "\\.mcollective$",
  "\\.choria$",
]);

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

interface DecodedCsr {
  info: DerNode;
  signatureAlgorithm: string;
  signature: Uint8Array;
  spki: DerNode;
  commonName: string;
  dnsNames: string[];
}

function expect(node: DerNode | undefined, tag: number, what: string): DerNode {
  if (node === undefined || node.tag !== tag) throw new CsrError(`could not parse CSR: malformed ${what}`);
  return node;
}

function commonNameOf(subject: DerNode): string {
  let commonName = "";
  for (const relativeName of children(subject.content)) {
    for (const attribute of children(expect(relativeName, TAG.set, "subject").content)) {
      const [type, value] = children(expect(attribute, TAG.sequence, "subject attribute").content);
      if (type && value && type.tag === TAG.oid && decodeOid(type.content) === OID.commonName) {
        commonName = Buffer.from(value.content).toString("utf8");
      }
    }
  }
  return commonName;
}

function dnsNamesOf(attributes: DerNode | undefined): string[] {
  const names: string[] = [];
  if (attributes === undefined) return names;
  for (const attribute of children(attributes.content)) {
    const [type, values] = children(expect(attribute, TAG.sequence, "attribute").content);
    if (!type || !values || decodeOid(expect(type, TAG.oid, "attribute type").content) !== OID.extensionRequest) continue;
    for (const extensions of children(expect(values, TAG.set, "attribute values").content)) {
      for (const extension of children(expect(extensions, TAG.sequence, "extensions").content)) {
        const parts = children(expect(extension, TAG.sequence, "extension").content);
        const id = parts[0];
        const value = parts[parts.length - 1];
        if (!id || decodeOid(id.content) !== OID.subjectAltName) continue;
        const generalNames = readElement(expect(value, TAG.octetString, "extension value").content).node;
        for (const name of children(expect(generalNames, TAG.sequence, "subjectAltName").content)) {
          if (name.tag === DNS_NAME_TAG) names.push(Buffer.from(name.content).toString("ascii"));
        }
      }
    }
  }
  return names;
}

function decodeCsr(pem: string): DecodedCsr {
  const match = /-----BEGIN (?:NEW )?CERTIFICATE REQUEST-----([\s\S]*?)-----END (?:NEW )?CERTIFICATE REQUEST-----/.exec(pem);
  if (!match) throw new CsrError("could not parse CSR: no CERTIFICATE REQUEST PEM block found");
  const der = new Uint8Array(Buffer.from((match[1] as string).replace(/\s+/g, ""), "base64"));
  try {
    const request = expect(readElement(der).node, TAG.sequence, "certificate request");
    const [info, algorithm, signature] = children(request.content);
    const infoNode = expect(info, TAG.sequence, "request info");
    const [version, subject, spki, attributes] = children(infoNode.content);
    expect(version, TAG.integer, "version");
    const [algorithmOid] = children(expect(algorithm, TAG.sequence, "signature algorithm").content);
    const signatureBits = expect(signature, TAG.bitString, "signature").content;
    return {
      info: infoNode,
      signatureAlgorithm: decodeOid(expect(algorithmOid, TAG.oid, "signature algorithm").content),
      signature: signatureBits.subarray(1),
      spki: expect(spki, TAG.sequence, "public key"),
      commonName: commonNameOf(expect(subject, TAG.sequence, "subject")),
      dnsNames: dnsNamesOf(attributes === undefined ? undefined : expect(attributes, ATTRIBUTES_TAG, "attributes")),
    };
  } catch (cause) {
    if (cause instanceof CsrError) throw cause;
    throw new CsrError(`could not parse CSR: ${(cause as Error).message}`, { cause });
  }
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

/**
 * A deny-list entry as a RegExp, or null when it does not compile (Go ignores such entries).
 * `/re/` (at least one character between the slashes) loses all leading and trailing slashes.
 */
function denyPattern(pattern: string): RegExp | null {
  const source = /^\/.+\/$/s.test(pattern) ? pattern.replace(/^\/+/, "").replace(/\/+$/, "") : pattern;
  try {
    return new RegExp(source);
  } catch {
    return null;
  }
}

/**
 * The provisioner's CSR checks (docs/protocol.md §9.7): present, parseable, CN equal to the identity,
 * and neither the CN nor any DNS SAN matching `denyList`. Throws CsrError.
 */
export function validateCsr(pem: string | undefined, identity: string, denyList: readonly string[]): void {
  if (pem === undefined || pem === "") throw new CsrError("no CSR received");
  const { commonName, dnsNames } = parseCsr(pem);
  if (commonName !== identity) throw new CsrError(`common name ${commonName} does not match identity ${identity}`);
  const patterns = denyList.map(denyPattern).filter((pattern): pattern is RegExp => pattern !== null);
  for (const name of [commonName, ...dnsNames]) {
    if (patterns.some((pattern) => pattern.test(name))) {
      throw new CsrError(`${name} matches denied certificate pattern`);
    }
  }
}

/** gencsr's `public_key` quirk: the PKCS#1 RSAPublicKey DER under a "PUBLIC KEY" label. */
export function rsaPublicKeyPkcs1Pem(publicKey: KeyObject): string {
  const key = publicKey.type === "private" ? createPublicKey(publicKey) : publicKey;
  if (key.asymmetricKeyType !== "rsa") throw new CsrError("an RSA key is required");
  return toPem("PUBLIC KEY", new Uint8Array(key.export({ format: "der", type: "pkcs1" })));
}
