import { expect } from "vitest";

/** What the outcome records of the server JWT the node was given: its `exp`, the first credential to expire, and its `jti` (the ledger's id of it). */
export function serverJwtExpiry(fleet: { node: (identity: string) => { serverJwt?: string } }, identity: string) {
  const payload = (fleet.node(identity).serverJwt ?? "").split(".")[1] ?? "";
  const { exp, jti } = JSON.parse(Buffer.from(payload, "base64url").toString()) as { exp: number; jti: string };
  return { kind: "server_jwt", expiresAt: exp * 1000, issuedAt: expect.any(Number), credentialId: jti };
}

/** What the outcome records of the provisioning JWT the fleet's nodes present: its issuer and `exp`. */
export function presentedJwt(fleet: { provisioningJwt: string }) {
  const payload = fleet.provisioningJwt.trim().split(".")[1] ?? "";
  const { iss, exp } = JSON.parse(Buffer.from(payload, "base64url").toString()) as { iss?: string; exp: number };
  return { issuer: iss ?? "", expiresAt: exp * 1000 };
}
