/**
 * Reading a PEM PKCS#10 certificate request: its subject common name, DNS SANs, and the parts its
 * signature covers. Nothing here is checked against policy (lib/crypto/csr.ts does that).
 */
import { CsrError } from "../errors";
import { children, decodeOid, type DerNode, readElement, TAG } from "./der";

const OID = {
  commonName: "2.5.4.3",
  extensionRequest: "1.2.840.113549.1.9.14",
  subjectAltName: "2.5.29.17",
} as const;

const DNS_NAME_TAG = 0x82;
const ATTRIBUTES_TAG = 0xa0;

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

/** Throws CsrError for anything but a well-formed CSR (the signature is not checked, as in Go). */
export function decodeCsr(pem: string): DecodedCsr {
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
