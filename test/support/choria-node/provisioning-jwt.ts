/** A node reading its own `provisioning.jwt` (the provisioner verifies it: lib/crypto/jwt.ts verifyProvisioningJwt). */
import { decodeJwt } from "../../../lib/crypto/jwt";
import { type ProvisioningClaims, typedProvisioningClaims } from "../../../lib/crypto/jwt-claims";
import { JwtError } from "../../../lib/errors";

/** Every `alg` golang-jwt v5 registers: ParseUnverified refuses any other before anything is verified. */
const GO_REGISTERED_ALGS = new Set([
  "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "none",
]);

/**
 * Reads a provisioning JWT without verifying it, as a node reads its own `provisioning.jwt` (tokens
 * `ParseProvisionTokenUnverified`): three decodable segments, a registered `alg`, claims of the right
 * types, and `sub` or `purpose` "choria_provisioning". Expiry and signature are NOT checked.
 */
export function parseProvisioningJwtUnverified(token: string): ProvisioningClaims {
  const decoded = decodeJwt(token);
  const alg = decoded.header.alg;
  if (typeof alg !== "string") throw new JwtError("token is unverifiable: signing method (alg) is unspecified");
  if (!GO_REGISTERED_ALGS.has(alg)) throw new JwtError("token is unverifiable: signing method (alg) is unavailable");
  const claims = typedProvisioningClaims(decoded.claims);
  if (claims.sub !== "choria_provisioning" && claims.purpose !== "choria_provisioning") {
    throw new JwtError("token is not a provisioning token");
  }
  return claims;
}
