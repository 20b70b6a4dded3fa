/** The credentials a provisioned host was given, as its entry records them, and renewal's marks on them. */

/** Which credential of a provisioned host expires first: the helper's x509 certificate or the server JWT we signed. */
export type ExpiryKind = "certificate" | "server_jwt";

/** When a provisioned host's credentials stop working (epoch ms), which one that is, and when they were issued. */
export interface CredentialsExpiry {
  expiresAt: number;
  kind: ExpiryKind;
  issuedAt: number;
  /** The issuance ledger's id of these credentials (server JWT `jti`, else certificate fingerprint): `history` marks that record live. */
  credentialId?: string;
}

/** Failed renewals of one host's credentials: how many in a row, the next try, the last reason and when. */
export interface RenewalMark {
  attempts: number;
  retryAt: number;
  reason: string;
  at: number;
}

/**
 * What a node's provisioning JWT (the bootstrap credential baked into its image) says of itself, as
 * the node presented it: its `iss` ("" when it has none) and when it stops being accepted (epoch ms:
 * its `exp`, or a chain-signed token's `issexp` when that comes first). Nothing secret: no token, no claim but these.
 */
export interface ProvisioningJwtExpiry {
  issuer: string;
  expiresAt: number;
}
