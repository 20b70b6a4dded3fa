/** What a ProvisionEngine is given: its settings with key material loaded, its ports, and each provision's options. */
import type { JwtVerifier } from "../crypto/jwt";
import type { SigningKey } from "../crypto/keys";
import type { ChoriaRpc } from "../ports/rpc";
import type { Clock } from "../ports/clock";
import type { HelperRunner } from "../ports/helper";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { PauseGate } from "../ports/lease-gate";
import type { CredentialsExpiry } from "../ports/credentials";
import type { IssuedCredentials } from "../ports/issuance-ledger";
import type { RandomSource, RemainingTime } from "./retry";

interface EngineFeatures {
  jwt: boolean;
  ed25519: boolean;
  pki: boolean;
  upgrades: boolean;
}

/** Exactly what the engine needs from the provisioner configuration, with key material loaded. */
export interface EngineSettings {
  features: EngineFeatures;
  /** `token`: sent with every choria_provision call. Secret. */
  token: string;
  certDenyList: readonly string[];
  serverJwtValidityMs: number;
  upgradesRepository: string;
  upgradesOptional: boolean;
  /** Discovery `interval`; work admitted more than twice this long ago is skipped. */
  intervalMs: number;
  /** The helper runner's own timeout (`helper_timeout`, Go's fixed 10 s by default): the gate must cover it. */
  helperTimeoutMs?: number;
  /** From `jwt_verify_cert`; required with features.jwt. */
  jwtVerifier?: JwtVerifier;
  /** From `jwt_signing_key`; required with features.ed25519. */
  signingKey?: SigningKey;
  /** Raw content of `jwt_signing_token` (the provisioner's client JWT) for chain-issuer data. */
  signingToken?: string;
}

export interface EngineDeps {
  settings: EngineSettings;
  rpc: ChoriaRpc;
  gate: PauseGate;
  helper: HelperRunner;
  metrics: Metrics;
  clock?: Clock;
  logger?: Logger;
  /** Backoff jitter source, [0, 1). */
  random?: RandomSource;
  /** gen25519 nonce source; 32 lowercase hex chars like Go's request ids. */
  newNonce?: () => string;
}

export interface ProvisionOptions {
  /** Time left in this invocation (minus a margin); attempts that cannot finish are not started. */
  remainingMs?: RemainingTime;
  /**
   * Records the credentials the node is about to be given (their expiry, and the issuance ledger's
   * record of them), before the configure request leaves. When it throws, nothing is sent: the
   * host fails at step configure and is retried.
   */
  recordCredentials?: (credentials: CredentialsExpiry, issued: IssuedCredentials) => Promise<void>;
}
