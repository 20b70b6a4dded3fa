/** The steps before the helper: what is fetched from the node (its JWT, ed25519 key, inventory and CSR), each checked as Go does. */
import { uuidHex } from "../crypto/ids";
import { validateCsr } from "../crypto/csr";
import { verifyNonceSignature } from "../crypto/nonce";
import { ProvisioningJwtExpiredError, verifyProvisioningJwt } from "../crypto/jwt";
import { provisioningJwtExpiry, type ProvisioningClaims } from "../crypto/jwt-claims";
import type { ProvisioningJwtExpiry } from "../ports/credentials";
import { ConfigError, JwtError, messageOf } from "../errors";
import type { HelperRequest } from "../ports/helper";
import { encodeGoJson } from "./go-json";
import { callPlanned, textField, type HostRun } from "./host-run";
import type { SecondAnswers } from "./collision";

export type Csr = NonNullable<HelperRequest["csr"]>;
export type Ed25519Key = NonNullable<HelperRequest["ed25519_pubkey"]>;

interface NodeJwt {
  claims: ProvisioningClaims;
  /** The node's half of the key transport's Diffie-Hellman exchange; empty when it did not start one. */
  serverEcdhPublic: string;
}

export interface NodeInventory {
  /** As the helper receives it: Go's JSON of the reply with its DDL defaults. */
  encoded: string;
  version: string;
  upgradable: boolean;
}

/**
 * The node's provisioning JWT, verified. `presented` hears the token's issuer and expiry when it is
 * authentic: valid, or expired (the bootstrap credential its image carries no longer enrols it).
 * `answers` hears the request's later replies: a different one is a second machine (lib/engine/collision.ts).
 */
export async function fetchJwt(run: HostRun, answers: SecondAnswers, presented: (expiry: ProvisioningJwtExpiry) => void): Promise<NodeJwt> {
  run.logger.info("Fetching JWT", run.log);
  const { raw, serverEcdhPublic } = await callPlanned(
    run,
    "jwt",
    () => ({ token: run.settings.token }),
    (reply) => {
      const ecdhPublic = textField(run, reply, "jwt", "ecdh_public");
      const jwt = textField(run, reply, "jwt", "jwt");
      answers.decided({ ecdhPublic, jwt });
      return { serverEcdhPublic: ecdhPublic, raw: jwt };
    },
    undefined,
    answers.jwt,
  );
  if (raw === "") throw new JwtError(`could not validate JWT from ${run.identity}: no JWT received`);
  const verifier = run.settings.jwtVerifier;
  if (!verifier) throw new ConfigError("jwt_verify_cert", "no JWT verification certificate configured, cannot validate JWT");
  let claims: ProvisioningClaims;
  try {
    claims = await verifyProvisioningJwt(raw, verifier, new Date(run.clock.now()));
  } catch (error) {
    if (error instanceof ProvisioningJwtExpiredError) presented(error.expiry);
    throw new JwtError(`could not validate JWT from ${run.identity}: ${messageOf(error)}`, { cause: error });
  }
  const expiry = provisioningJwtExpiry(claims);
  if (expiry) presented(expiry);
  return { claims, serverEcdhPublic };
}

export async function fetchEd25519Key(run: HostRun): Promise<Ed25519Key> {
  run.logger.info("Fetching ED25519 public key", run.log);
  const newNonce = run.deps.newNonce ?? uuidHex;
  let nonce = "";
  // A fresh nonce per attempt, and the signature checked inside the attempt, as Go does: a bad
  // signature is retried like any other failed attempt.
  return await callPlanned(
    run,
    "gen25519",
    () => {
      nonce = newNonce();
      return { nonce, token: run.settings.token };
    },
    (reply) => {
      const publicKey = textField(run, reply, "gen25519", "public_key");
      const signature = textField(run, reply, "gen25519", "signature");
      verifyNonceSignature(publicKey, nonce, signature);
      return { public_key: publicKey, directory: textField(run, reply, "gen25519", "directory"), signature };
    },
  );
}

/** `answers` hears the request's later replies, as fetchJwt's. */
export async function fetchInventory(run: HostRun, answers: SecondAnswers): Promise<NodeInventory> {
  run.logger.info("Fetching Inventory", run.log);
  const data = await callPlanned(run, "inventory", () => ({}), (reply) => reply.data, undefined, answers.inventory);
  // The Go client fills DDL output defaults before decoding the reply; only `upgradable` has one.
  const withDefaults: Record<string, unknown> = { ...data };
  if (!("upgradable" in withDefaults)) withDefaults.upgradable = false;
  return {
    encoded: encodeGoJson(withDefaults),
    version: typeof data.version === "string" ? data.version : "",
    upgradable: withDefaults.upgradable === true,
  };
}

export async function fetchCsr(run: HostRun): Promise<Csr> {
  run.logger.info("Fetching CSR", run.log);
  const csr = await callPlanned(
    run,
    "gencsr",
    () => ({ cn: run.identity, token: run.settings.token }),
    (reply) => ({
      csr: textField(run, reply, "gencsr", "csr"),
      public_key: textField(run, reply, "gencsr", "public_key"),
      ssldir: textField(run, reply, "gencsr", "ssldir"),
    }),
  );
  validateCsr(csr.csr, run.identity, run.settings.certDenyList);
  return csr;
}
