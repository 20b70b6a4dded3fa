/**
 * The provisioning sequence for one host (docs/behaviour.md §3, docs/protocol.md §7), with the Go provisioner's
 * `host.Provision` as the reference: JWT, ed25519 key, inventory, CSR, helper, then shutdown or
 * server JWT, key transport, upgrade, configure and restart. Every step that leaves the process
 * reads the pause gate first, so a deposed leader stops at the next attempt boundary.
 */
import {
  addChainIssuerData,
  buildServerClaims,
  certificateValidity,
  compareVersions,
  decodeHex,
  encodeHex,
  encryptLegacyPem,
  generateX25519KeyPair,
  helperJwtClaims,
  type JwtVerifier,
  type ProvisioningClaims,
  serverJwtSettings,
  signJwt,
  type SigningKey,
  uuidHex,
  validateCsr,
  verifyNonceSignature,
  verifyProvisioningJwt,
  x25519SharedSecret,
} from "../crypto";
import {
  ConfigError,
  DeferredError,
  HelperError,
  JwtError,
  messageOf,
  PausedError,
  ProvisionerError,
  RpcProtocolError,
  RpcStatusError,
  RpcTimeoutError,
  RpcTransportError,
} from "../errors";
import {
  EXTRA_METRIC,
  METRIC,
  silentLogger,
  systemClock,
  type AttemptWindow,
  type ChoriaRpc,
  type Clock,
  type HelperRequest,
  type HelperResponse,
  type HelperRunner,
  type HostWork,
  type LogAttributes,
  type Logger,
  type Metrics,
  type PauseGate,
  type RpcReply,
} from "../ports";
import type { CredentialsExpiry } from "../admission/registry";
import { CredentialsNotRecordedError, KeyTransportError, OutOfTimeError, RpcRetriesExhaustedError, ServerJwtError, UpgradeError } from "./errors";
import { encodeGoJson } from "./go-json";
import { waitedTooLong } from "./waiting";
import { AGENT_TIMEOUT_MS, HELPER_TIMEOUT_MS, RESTART_SPLAY_SECONDS, RPC_PLAN, rpcLabel, type PlannedRpc } from "./plan";
import { assertGateOpen, assertTimeLeft, rpcWithRetries, type RandomSource, type RemainingTime, type RetryContext } from "./retry";

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
   * Records the credentials the node is about to be given, before the configure request leaves.
   * When it throws, nothing is sent: the host fails at step configure and is retried.
   */
  recordCredentials?: (credentials: CredentialsExpiry) => Promise<void>;
}

/** Where in the sequence an outcome arose. */
type ProvisionStep =
  | "jwt"
  | "gen25519"
  | "inventory"
  | "gencsr"
  | "helper"
  | "shutdown"
  | "server_jwt"
  | "key"
  | "upgrade"
  | "configure"
  | "restart";

export type ProvisionOutcome =
  /** Configured and restarted; `credentials` when what it was given expires (the first to expire of certificate and server JWT). */
  | { kind: "provisioned"; identity: string; credentials?: CredentialsExpiry }
  /** release_update accepted; the node restarts upgraded and is provisioned again. */
  | { kind: "upgrading"; identity: string; fromVersion: string; toVersion: string }
  /** The helper asked for a shutdown; `acknowledged` is false when the node answered with an error status. */
  | { kind: "shutdown"; identity: string; acknowledged: boolean }
  /** The helper deferred; the host is retried on a later discovery or event. */
  | { kind: "deferred"; identity: string; error: DeferredError }
  /** `retryable`: the work should go back to the queue (the invocation ran out of time, or the broker path failed). */
  | { kind: "failed"; identity: string; step: ProvisionStep; error: ProvisionerError; retryable: boolean }
  /** Work waited longer than 2 x interval. */
  | { kind: "skipped"; identity: string; reason: string }
  /** The pause gate closed; nothing more was sent to the node. */
  | { kind: "paused"; identity: string; step: ProvisionStep; error: PausedError };

/**
 * Whether the host stays "known" (not re-admitted) for KNOWN_AFTER_SUCCESS_MS, as Go delays the
 * removal of provisioned and shut-down hosts; upgrading hosts are forgotten at once so they are
 * provisioned as soon as they come back.
 */
export function keepsHostKnown(outcome: ProvisionOutcome): boolean {
  return outcome.kind === "provisioned" || outcome.kind === "shutdown";
}

/** Outcomes the Go daemon counts as `provisioned` (every other outcome is a `provision_error`). */
export function isSuccessfulOutcome(outcome: ProvisionOutcome): boolean {
  return outcome.kind === "provisioned" || outcome.kind === "upgrading" || outcome.kind === "shutdown";
}

/**
 * Provisions hosts. One engine per process: it keeps the `busy_workers` gauge across concurrent
 * provisions of one invocation.
 */
export class ProvisionEngine {
  private busy = 0;
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(private readonly deps: EngineDeps) {
    this.clock = deps.clock ?? systemClock;
    this.logger = deps.logger ?? silentLogger;
  }

  async provision(work: HostWork, options: ProvisionOptions = {}): Promise<ProvisionOutcome> {
    this.setBusy(+1);
    const startedAt = this.clock.monotonic();
    try {
      const outcome = await this.run(work, options);
      this.record(work, outcome);
      return outcome;
    } finally {
      this.setBusy(-1);
      // The gauge is per invocation; these durations add up across all of them, so their sum per
      // period over the period's length is how many workers were busy on average, site-wide.
      this.deps.metrics.timing(EXTRA_METRIC.busyWorkerSeconds, (this.clock.monotonic() - startedAt) / 1000);
    }
  }

  private setBusy(change: number): void {
    this.busy += change;
    this.deps.metrics.gauge(METRIC.busyWorkers, this.busy);
  }

  private async run(work: HostWork, options: ProvisionOptions): Promise<ProvisionOutcome> {
    const identity = work.identity;
    const waited = waitedTooLong(work.admittedAt, this.clock.now(), this.deps.settings.intervalMs);
    if (waited) return { kind: "skipped", identity, reason: waited };

    this.logger.info(`Provisioning ${identity}`, { identity, term: work.term });
    const host = new HostProvisioning(work, this.deps, this.clock, this.logger, options);
    try {
      return await host.provision();
    } catch (error) {
      return classifyFailure(identity, host.step, error);
    }
  }

  private record(work: HostWork, outcome: ProvisionOutcome): void {
    const attributes: LogAttributes = { identity: work.identity, term: work.term, outcome: outcome.kind };
    if (isSuccessfulOutcome(outcome)) {
      this.deps.metrics.count(METRIC.provisioned);
      this.logger.info(`Provisioned ${work.identity}`, attributes);
      return;
    }
    this.deps.metrics.count(METRIC.provisionErrors);
    // The error's causes too: a pause over a lease store that timed out and one over an
    // AccessDeniedException read the same without them.
    const error = "error" in outcome ? outcome.error : undefined;
    const reason = outcome.kind === "skipped" ? outcome.reason : error ? messageOf(error) : outcome.kind;
    const step = "step" in outcome ? outcome.step : undefined;
    this.logger.error(`Could not provision ${work.identity}: ${reason}`, { ...attributes, step, ...(error ? { error } : {}) });
  }
}

function classifyFailure(identity: string, step: ProvisionStep, error: unknown): ProvisionOutcome {
  if (error instanceof PausedError) return { kind: "paused", identity, step, error };
  if (error instanceof DeferredError) return { kind: "deferred", identity, error };
  const named = error instanceof ProvisionerError ? error : new ProvisionerError(messageOf(error), { cause: error });
  const retryable = error instanceof OutOfTimeError || error instanceof CredentialsNotRecordedError || isTransportFailure(error);
  return { kind: "failed", identity, step, error: named, retryable };
}

/** The last attempt never verifiably reached the broker: nothing was learnt about the node, so it does not count against it. */
function isTransportFailure(error: unknown): boolean {
  return error instanceof RpcTransportError || (error instanceof RpcRetriesExhaustedError && error.cause instanceof RpcTransportError);
}

type Csr = NonNullable<HelperRequest["csr"]>;
type Ed25519Key = NonNullable<HelperRequest["ed25519_pubkey"]>;

/** The state of one host's run through the sequence (Go `host.Host`). */
class HostProvisioning {
  step: ProvisionStep = "jwt";

  private readonly identity: string;
  private readonly settings: EngineSettings;
  private readonly retry: RetryContext;
  private readonly log: LogAttributes;

  private claims: ProvisioningClaims | null = null;
  private serverEcdhPublic = "";
  private ed25519Key: Ed25519Key | null = null;
  private csr: Csr | null = null;
  private inventory = "";
  private version = "";
  private upgradable = false;
  /** Epoch ms the signed server JWT expires (its `exp`). */
  private serverJwtExpiresAt: number | undefined;
  private readonly record: ProvisionOptions["recordCredentials"];

  constructor(
    private readonly work: HostWork,
    private readonly deps: EngineDeps,
    private readonly clock: Clock,
    private readonly logger: Logger,
    options: ProvisionOptions,
  ) {
    this.identity = work.identity;
    this.settings = deps.settings;
    this.log = { identity: work.identity, term: work.term };
    this.retry = {
      gate: deps.gate,
      term: work.term,
      clock,
      metrics: deps.metrics,
      logger,
      random: deps.random,
      remainingMs: options.remainingMs,
    };
    this.record = options.recordCredentials;
  }

  async provision(): Promise<ProvisionOutcome> {
    const { features } = this.settings;
    if (features.jwt) {
      this.step = "jwt";
      await this.fetchJwt();
    }
    if (features.ed25519) {
      this.step = "gen25519";
      await this.fetchEd25519Key();
    }
    this.step = "inventory";
    await this.fetchInventory();
    if (features.pki) {
      this.step = "gencsr";
      await this.fetchCsr();
    }

    this.step = "helper";
    const response = await this.runHelper();
    if (response.defer) {
      throw new DeferredError(`configuration defered: ${response.msg}`);
    }
    if (response.shutdown) {
      this.step = "shutdown";
      return { kind: "shutdown", identity: this.identity, acknowledged: await this.shutdown(response.msg) };
    }

    let serverJwt = "";
    if (features.ed25519) {
      this.step = "server_jwt";
      serverJwt = await this.signServerJwt(response);
    }

    let key = { encrypted: "", ecdhPublic: "" };
    if (response.key !== "") {
      this.step = "key";
      key = this.encryptKey(response.key);
    }

    if (features.upgrades && response.upgrade !== "") {
      this.step = "upgrade";
      if (await this.upgrade(response.upgrade)) {
        return { kind: "upgrading", identity: this.identity, fromVersion: this.version, toVersion: response.upgrade };
      }
    }

    const credentials = this.credentialsExpiry(response);
    this.step = "configure";
    if (credentials) await this.recordCredentials(credentials);
    await this.configure(response, serverJwt, key);
    this.step = "restart";
    await this.restartConfigured();
    return { kind: "provisioned", identity: this.identity, ...(credentials ? { credentials } : {}) };
  }

  /**
   * Whichever of the helper's certificate and the server JWT expires first, for renewal. A
   * certificate that cannot be read is the node's to reject, not a reason to stop here: the host
   * is then provisioned without a known certificate expiry, and the log says so.
   */
  private credentialsExpiry(response: HelperResponse): CredentialsExpiry | undefined {
    const issuedAt = Math.floor(this.clock.now());
    const candidates: CredentialsExpiry[] = [];
    if (this.serverJwtExpiresAt !== undefined) candidates.push({ expiresAt: this.serverJwtExpiresAt, kind: "server_jwt", issuedAt });
    if (response.certificate !== "") {
      try {
        candidates.push({ expiresAt: certificateValidity(response.certificate).notAfter, kind: "certificate", issuedAt });
      } catch (error) {
        this.logger.warn("the helper's certificate could not be read; its expiry is not recorded", { ...this.log, error: messageOf(error) });
      }
    }
    return candidates.sort((a, b) => a.expiresAt - b.expiresAt)[0];
  }

  /**
   * One planned RPC with retries. `handle` runs per attempt and may throw to reject the reply;
   * `onStatus`, when given, turns an error status from the node into a successful attempt.
   */
  private call<T>(
    planned: PlannedRpc,
    data: () => Record<string, unknown>,
    handle: (reply: RpcReply) => T,
    onStatus?: (status: RpcStatusError) => T,
  ): Promise<T> {
    const plan = RPC_PLAN[planned];
    return rpcWithRetries({
      ...this.retry,
      identity: this.identity,
      rpc: rpcLabel(plan),
      tries: plan.tries,
      attemptTimeoutMs: plan.timeoutMs,
      call: async (_try, window) => {
        let reply: RpcReply;
        try {
          reply = await this.deps.rpc.call({
            identity: this.identity,
            agent: plan.agent,
            action: plan.action,
            data: data(),
            timeoutMs: plan.timeoutMs,
            // The node may take its agent's whole DDL timeout to act: the request must reach it early enough for that to end inside the window.
            sendWithinMs: window.endsBy - AGENT_TIMEOUT_MS[plan.agent] - this.clock.monotonic(),
            gateCheckedMsAgo: Math.max(0, this.clock.now() - window.stampedAt),
          });
        } catch (error) {
          if (onStatus && error instanceof RpcStatusError) return onStatus(error);
          throw error;
        }
        return handle(reply);
      },
    });
  }

  private textField(reply: RpcReply, planned: PlannedRpc, name: string): string {
    const value = reply.data[name];
    if (value === undefined || value === null) return "";
    if (typeof value !== "string") {
      throw new RpcProtocolError(this.identity, rpcLabel(RPC_PLAN[planned]), `reply field ${name} is not a string`);
    }
    return value;
  }

  private async fetchJwt(): Promise<void> {
    this.logger.info("Fetching JWT", this.log);
    const raw = await this.call(
      "jwt",
      () => ({ token: this.settings.token }),
      (reply) => {
        this.serverEcdhPublic = this.textField(reply, "jwt", "ecdh_public");
        return this.textField(reply, "jwt", "jwt");
      },
    );
    if (raw === "") throw new JwtError(`could not validate JWT from ${this.identity}: no JWT received`);
    const verifier = this.settings.jwtVerifier;
    if (!verifier) throw new ConfigError("jwt_verify_cert", "no JWT verification certificate configured, cannot validate JWT");
    try {
      this.claims = await verifyProvisioningJwt(raw, verifier, new Date(this.clock.now()));
    } catch (error) {
      throw new JwtError(`could not validate JWT from ${this.identity}: ${messageOf(error)}`, { cause: error });
    }
  }

  private async fetchEd25519Key(): Promise<void> {
    this.logger.info("Fetching ED25519 public key", this.log);
    const newNonce = this.deps.newNonce ?? uuidHex;
    let nonce = "";
    // A fresh nonce per attempt, and the signature checked inside the attempt, as Go does: a bad
    // signature is retried like any other failed attempt.
    this.ed25519Key = await this.call(
      "gen25519",
      () => {
        nonce = newNonce();
        return { nonce, token: this.settings.token };
      },
      (reply) => {
        const publicKey = this.textField(reply, "gen25519", "public_key");
        const signature = this.textField(reply, "gen25519", "signature");
        verifyNonceSignature(publicKey, nonce, signature);
        return { public_key: publicKey, directory: this.textField(reply, "gen25519", "directory"), signature };
      },
    );
  }

  private async fetchInventory(): Promise<void> {
    this.logger.info("Fetching Inventory", this.log);
    const data = await this.call("inventory", () => ({}), (reply) => reply.data);
    // The Go client fills DDL output defaults before decoding the reply; only `upgradable` has one.
    const withDefaults: Record<string, unknown> = { ...data };
    if (!("upgradable" in withDefaults)) withDefaults.upgradable = false;
    this.inventory = encodeGoJson(withDefaults);
    this.version = typeof data.version === "string" ? data.version : "";
    this.upgradable = withDefaults.upgradable === true;
  }

  private async fetchCsr(): Promise<void> {
    this.logger.info("Fetching CSR", this.log);
    this.csr = await this.call(
      "gencsr",
      () => ({ cn: this.identity, token: this.settings.token }),
      (reply) => ({
        csr: this.textField(reply, "gencsr", "csr"),
        public_key: this.textField(reply, "gencsr", "public_key"),
        ssldir: this.textField(reply, "gencsr", "ssldir"),
      }),
    );
    validateCsr(this.csr.csr, this.identity, this.settings.certDenyList);
  }

  private async runHelper(): Promise<HelperResponse> {
    const request: HelperRequest = {
      identity: this.identity,
      csr: this.csr,
      ed25519_pubkey: this.ed25519Key,
      inventory: this.inventory,
      jwt: this.claims ? helperJwtClaims(this.claims) : null,
    };
    const helperTimeoutMs = this.deps.settings.helperTimeoutMs ?? HELPER_TIMEOUT_MS;
    assertTimeLeft(this.retry.remainingMs, "the helper", helperTimeoutMs);
    const window = await assertGateOpen(this.deps.gate, this.work.term, helperTimeoutMs, "the helper");

    const started = this.clock.monotonic();
    try {
      return await this.withinWindow(this.deps.helper.run(request), window);
    } catch (error) {
      if (error instanceof PausedError) throw error;
      this.deps.metrics.count(METRIC.helperErrors);
      if (error instanceof HelperError) throw error;
      throw new HelperError(`could not invoke configure helper: ${messageOf(error)}`, { cause: error });
    } finally {
      this.deps.metrics.timing(METRIC.helperTime, (this.clock.monotonic() - started) / 1000);
    }
  }

  /**
   * The helper's answer counts only inside the window the gate granted: one that arrives after it
   * (a helper slower than its own timeout, a Lambda helper answering late) is discarded, because
   * the lease it was asked under may have moved on.
   */
  private async withinWindow<T>(work: Promise<T>, window: AttemptWindow): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const closed = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new PausedError(`the helper did not answer inside its lease window; its answer is discarded`)),
        // setTimeout fires at once for delays beyond 2^31 - 1 ms.
        Math.min(Math.max(0, window.endsBy - this.clock.monotonic()), 2_147_483_647),
      );
    });
    try {
      const answer = await Promise.race([work, closed]);
      // A clock that jumped past the window while the helper ran (a freeze) discards the answer too.
      if (this.clock.monotonic() > window.endsBy) throw new PausedError("the helper answered after its lease window; its answer is discarded");
      return answer;
    } finally {
      clearTimeout(timer);
      work.catch(() => undefined);
    }
  }

  private async shutdown(reason: string): Promise<boolean> {
    this.logger.warn(reason === "" ? "Shutting down host based on helper output, no reason given" : "Shutting down host based on helper output", {
      ...this.log,
      reason: reason === "" ? undefined : reason,
    });
    const acknowledged = await this.call(
      "shutdown",
      () => ({ token: this.settings.token }),
      () => true,
      // Go only logs an error status from shutdown; the call is done either way.
      (status) => {
        this.logger.warn(`Could not shutdown ${status.sender}: ${status.statusmsg} (${status.statuscode})`, this.log);
        return false;
      },
    );
    if (acknowledged) this.deps.metrics.count(METRIC.helperShutdownRequests);
    return acknowledged;
  }

  private async signServerJwt(response: HelperResponse): Promise<string> {
    const publicKeyHex = this.ed25519Key?.public_key ?? "";
    if (publicKeyHex === "") throw new ServerJwtError("no ed25519 public key set");
    const signingKey = this.settings.signingKey;
    if (!signingKey) throw new ConfigError("jwt_signing_key", "no jwt signing key configured");
    if (!(this.settings.serverJwtValidityMs > 0)) throw new ConfigError("server_jwt_validity", "no default validity configured");

    const now = new Date(this.clock.now());
    const jwtSettings = serverJwtSettings(response.configuration, response.server_claims, this.settings.serverJwtValidityMs, now);
    let claims = buildServerClaims({
      identity: this.identity,
      publicKeyHex,
      org: jwtSettings.org,
      collectives: jwtSettings.collectives,
      validityMs: jwtSettings.validityMs,
      permissions: jwtSettings.permissions,
      pubSubjects: jwtSettings.pubSubjects,
      now,
    });
    if (this.settings.signingToken) {
      claims = addChainIssuerData(claims, this.settings.signingToken, signingKey);
    }
    this.serverJwtExpiresAt = claims.exp * 1000;
    return signJwt(claims, signingKey);
  }

  private encryptKey(pem: string): { encrypted: string; ecdhPublic: string } {
    if (this.serverEcdhPublic === "") {
      throw new KeyTransportError("private key received from helper but server did not start Diffie-Hellman exchange");
    }
    try {
      const serverPublic = decodeHex(this.serverEcdhPublic);
      const own = generateX25519KeyPair();
      const shared = x25519SharedSecret(own.privateKey, serverPublic);
      return { encrypted: encryptLegacyPem(pem, shared), ecdhPublic: encodeHex(own.publicKey) };
    } catch (error) {
      throw new KeyTransportError(`could not encrypt the private key for ${this.identity}: ${messageOf(error)}`, { cause: error });
    }
  }

  /** True when release_update was accepted (stop without configuring); false to carry on. */
  private async upgrade(target: string): Promise<boolean> {
    try {
      return await this.releaseUpdate(target);
    } catch (error) {
      // A closed gate or the invocation deadline stops the sequence even when upgrades are optional.
      if (error instanceof PausedError || error instanceof OutOfTimeError || !this.settings.upgradesOptional) throw error;
      this.logger.warn(`Could not upgrade to ${target}, continuing: ${messageOf(error)}`, this.log);
      return false;
    }
  }

  private async releaseUpdate(target: string): Promise<boolean> {
    const { upgradesRepository, upgradesOptional } = this.settings;
    if (upgradesRepository === "" && !upgradesOptional) {
      throw new UpgradeError("upgrades_repository not configured for upgrades feature");
    }
    if (this.version === "") throw new UpgradeError("did not receive a version in inventory");
    if (!this.upgradable) throw new UpgradeError("does not support upgrades");
    if (compareVersions(this.version, target) === 0) return false;

    this.logger.warn(`Will attempt version update from ${this.version} to ${target}`, this.log);
    try {
      await this.call(
        "releaseUpdate",
        () => ({ repository: upgradesRepository, token: this.settings.token, version: target }),
        () => undefined,
      );
    } catch (error) {
      if (error instanceof PausedError || error instanceof OutOfTimeError) throw error;
      throw new UpgradeError(`update to ${target} failed: ${messageOf(error)}`, { cause: error });
    }
    return true;
  }

  private async configure(response: HelperResponse, serverJwt: string, key: { encrypted: string; ecdhPublic: string }): Promise<void> {
    const ssldir = this.csr !== null && this.csr.ssldir !== "" ? this.csr.ssldir : response.ssldir;
    await this.call(
      "configure",
      () => {
        // Checked per attempt, as Go does inside the retry loop: each try fails without sending.
        if (Object.keys(response.configuration).length === 0) throw new HelperError("empty configuration");
        this.logger.info("Configuring node", this.log);
        return {
          action_policies: { ...response.action_policies },
          ca: response.ca,
          certificate: response.certificate,
          config: encodeGoJson(response.configuration),
          ecdh_public: key.ecdhPublic,
          key: key.encrypted,
          opa_policies: { ...response.opa_policies },
          server_jwt: serverJwt,
          ssldir,
          token: this.settings.token,
        };
      },
      () => undefined,
    );
  }

  private async recordCredentials(credentials: CredentialsExpiry): Promise<void> {
    if (!this.record) return;
    try {
      await this.record(credentials);
    } catch (error) {
      throw new CredentialsNotRecordedError(`the credentials could not be recorded before configuring: ${messageOf(error)}`, { cause: error });
    }
  }

  /**
   * Restarts the node on its new configuration. When no restart attempt got a reply, the last one
   * timing out, the node is taken as restarted: it answers before it restarts, so once a reply is
   * lost the retries talk to a node that has left the provisioning broker. Counted as a failure, its
   * new credentials would be unknown to the registry and renewal would let them expire in service.
   * A node that did not restart is still in provisioning mode, and discovery provisions it again.
   */
  private async restartConfigured(): Promise<void> {
    try {
      await this.restart();
    } catch (error) {
      if (!(error instanceof RpcRetriesExhaustedError && error.cause instanceof RpcTimeoutError)) throw error;
      this.logger.warn("no restart attempt was answered after the node took its configuration; taking it as restarted", { ...this.log, error: messageOf(error) });
    }
  }

  private async restart(): Promise<void> {
    this.logger.info("Restarting node", this.log);
    await this.call("restart", () => ({ splay: RESTART_SPLAY_SECONDS, token: this.settings.token }), () => undefined);
  }
}
