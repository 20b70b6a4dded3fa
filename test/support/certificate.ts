/** Self-signed x509 certificates (openssl) with a chosen validity, for what reads a helper's `certificate`. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A PEM certificate for `commonName` valid for `days` days from now (openssl's clock: the real one). */
export function selfSignedCertificate(commonName: string, days: number): string {
  const dir = mkdtempSync(join(tmpdir(), "renewal-cert-"));
  try {
    const cert = join(dir, "cert.pem");
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", join(dir, "key.pem"), "-out", cert, "-days", String(days), "-subj", `/CN=${commonName}`],
      { stdio: "ignore" },
    );
    return readFileSync(cert, "utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
