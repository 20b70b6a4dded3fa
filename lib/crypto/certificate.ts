/** Reading what the provisioner needs from a certificate the helper issued: its validity. */
import { X509Certificate } from "node:crypto";
import { ProvisionerError } from "../errors";

class CertificateError extends ProvisionerError {}

/**
 * The validity of the first certificate of a PEM bundle (the node's own; the rest is its chain), as
 * epoch ms. Throws CertificateError naming what could not be read.
 */
export function certificateValidity(pem: string): { notBefore: number; notAfter: number } {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(pem);
  } catch (error) {
    throw new CertificateError("the helper's certificate is not a PEM x509 certificate", { cause: error });
  }
  const notBefore = Date.parse(certificate.validFrom);
  const notAfter = Date.parse(certificate.validTo);
  if (!Number.isFinite(notBefore) || !Number.isFinite(notAfter)) {
    throw new CertificateError(`the helper's certificate has an unreadable validity (${certificate.validFrom} - ${certificate.validTo})`);
  }
  return { notBefore, notAfter };
}
