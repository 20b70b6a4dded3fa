/** Reading what the provisioner needs from a certificate the helper issued: its validity, and what the issuance ledger records of it. */
import { createHash, X509Certificate } from "node:crypto";
import { ProvisionerError } from "../errors";
import type { IssuedCertificate } from "../ports/issuance-ledger";

class CertificateError extends ProvisionerError {}

/** The first certificate of a PEM bundle (the node's own; the rest is its chain) as the ledger records it; throws CertificateError naming what could not be read. */
export function certificateIdentity(pem: string): IssuedCertificate {
  const certificate = parse(pem);
  const spki = certificate.publicKey.export({ type: "spki", format: "der" });
  return {
    serial: certificate.serialNumber,
    sha256: certificate.fingerprint256,
    issuer: distinguishedName(certificate.issuer),
    subject: distinguishedName(certificate.subject),
    notAfter: validityOf(certificate).notAfter,
    keySha256: createHash("sha256").update(spki).digest("hex"),
  };
}

/** Node prints a name one attribute a line; the ledger keeps it on one. */
const distinguishedName = (lines: string) => lines.split("\n").filter((line) => line !== "").join(", ");

function parse(pem: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (error) {
    throw new CertificateError("the helper's certificate is not a PEM x509 certificate", { cause: error });
  }
}

function validityOf(certificate: X509Certificate): { notBefore: number; notAfter: number } {
  const notBefore = Date.parse(certificate.validFrom);
  const notAfter = Date.parse(certificate.validTo);
  if (!Number.isFinite(notBefore) || !Number.isFinite(notAfter)) {
    throw new CertificateError(`the helper's certificate has an unreadable validity (${certificate.validFrom} - ${certificate.validTo})`);
  }
  return { notBefore, notAfter };
}
