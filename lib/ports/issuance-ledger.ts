/**
 * The issuance ledger port: one record per credential the provisioner issued or renewed, kept for
 * the site's `ledger_retention` whether the node took it or not, with nothing secret in it (no token,
 * key or configuration value; the helper's verdict only as a digest of its public parts).
 */

/** Whether the identity held recorded credentials when these were issued: a first provisioning or a renewal. */
type IssuanceKind = "provision" | "renewal";

/** An x509 certificate the helper issued: what names it, who signed it, and the key it binds. */
export interface IssuedCertificate {
  /** Hex, as `openssl x509 -serial` prints it. */
  serial: string;
  /** SHA-256 of the DER certificate, `AB:CD:...` as `openssl x509 -fingerprint -sha256` prints it. */
  sha256: string;
  /** The issuer's distinguished name: the CA that signed it. */
  issuer: string;
  subject: string;
  /** Epoch ms. */
  notAfter: number;
  /** SHA-256 (hex) of the certified public key's SubjectPublicKeyInfo DER: the node's CSR key when the helper signed its CSR. */
  keySha256: string;
}

/** A server JWT the provisioner signed. */
export interface IssuedServerJwt {
  jti: string;
  /** Its `exp`, epoch ms. */
  expiresAt: number;
  /** Its `iss`: "Choria Provisioner", or the chain issuer `C-<jti>.<public key>` of the signing token. */
  issuer: string;
  /** SHA-256 (hex) of the node's raw ed25519 public key, the one it proved by signing the nonce. */
  keySha256: string;
}

/** What the engine knows of the credentials it is about to send a node. */
export interface IssuedCredentials {
  /** The server JWT's `jti` when one was signed, else the certificate's SHA-256 fingerprint: the record's key within the identity. */
  credentialId: string;
  /** Epoch ms. */
  issuedAt: number;
  certificate?: IssuedCertificate;
  serverJwt?: IssuedServerJwt;
  /** SHA-256 (hex) of the helper's verdict with every secret left out (lib/engine/issuance.ts says what is in it). */
  verdictSha256: string;
}

/** One ledger record. */
export interface Issuance extends IssuedCredentials {
  site: string;
  identity: string;
  kind: IssuanceKind;
  /** The lease term the host was provisioned under. */
  term: number;
  /** The deployment that issued it. */
  deploymentId: string;
  /** Epoch ms after which the ledger may delete it (issuedAt + ledger_retention). */
  expiresAt: number;
}

export interface IssuanceLedger {
  /** Writes the record; writing the same record again changes nothing (its key is identity + credentialId). */
  record(issuance: Issuance): Promise<void>;
  /** Every record of `identity` still kept, oldest first. */
  history(site: string, identity: string): Promise<Issuance[]>;
  /** Every record of the site issued in [since, until], oldest first. */
  issuedBetween(site: string, since: number, until: number): Promise<Issuance[]>;
}
