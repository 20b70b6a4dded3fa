/**
 * The provisioning sequence for one host (docs/behaviour.md §3, docs/protocol.md §7), with the Go provisioner's
 * `host.Provision` as the reference: JWT, ed25519 key, inventory, CSR, helper, then shutdown or
 * server JWT, key transport, upgrade, configure and restart. Every step that leaves the process
 * reads the pause gate first, so a deposed leader stops at the next attempt boundary.
 */
import { helperJwtClaims, type ProvisioningClaims } from "../crypto/jwt-claims";
import { DeferredError, messageOf } from "../errors";
import { EXTRA_METRIC, METRIC } from "../ports/metric-names";
import { silentLogger, type LogAttributes, type Logger } from "../ports/logger";
import { systemClock, type Clock } from "../ports/clock";
import type { HostWork } from "../ports/host-work";
import type { ProvisioningJwtExpiry } from "../ports/credentials";
import { credentialsExpiry, encryptKey, recordCredentials, signServerJwt, type ServerJwt, type TransportedKey } from "./credentials";
import { runHelper } from "./helper-step";
import { issuedCredentials } from "./issuance";
import { SecondAnswers } from "./collision";
import type { HostRun } from "./host-run";
import { configure, restartConfigured, shutdown, upgrade } from "./node-changes";
import { fetchCsr, fetchEd25519Key, fetchInventory, fetchJwt, type Csr, type Ed25519Key } from "./node-facts";
import { classifyFailure, isSuccessfulOutcome, type ProvisionOutcome, type ProvisionStep } from "./outcome";
import type { EngineDeps, ProvisionOptions } from "./settings";
import { waitedTooLong } from "./waiting";

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
      return classifyFailure(identity, host.step, error, host.provisioningJwt);
    } finally {
      host.answers.stop();
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

/** One host's run through the sequence (Go `host.Host`), and the step it has reached. */
class HostProvisioning {
  step: ProvisionStep = "jwt";
  /** The node's provisioning JWT, once it presented an authentic one that expires. */
  provisioningJwt?: ProvisioningJwtExpiry;

  private readonly run: HostRun;
  /** The later answers to the `jwt` and `inventory` requests, heard until configure. */
  readonly answers = new SecondAnswers();

  constructor(
    work: HostWork,
    deps: EngineDeps,
    clock: Clock,
    logger: Logger,
    private readonly options: ProvisionOptions,
  ) {
    this.run = {
      identity: work.identity,
      work,
      deps,
      settings: deps.settings,
      clock,
      logger,
      log: { identity: work.identity, term: work.term },
      retry: { gate: deps.gate, term: work.term, clock, metrics: deps.metrics, logger, random: deps.random, remainingMs: options.remainingMs },
    };
  }

  async provision(): Promise<ProvisionOutcome> {
    const { run } = this;
    const { identity, settings } = run;
    const { features } = settings;
    let jwt: { claims: ProvisioningClaims | null; serverEcdhPublic: string } = { claims: null, serverEcdhPublic: "" };
    if (features.jwt) {
      this.step = "jwt";
      jwt = await fetchJwt(run, this.answers, (expiry) => (this.provisioningJwt = expiry));
    }
    let ed25519Key: Ed25519Key | null = null;
    if (features.ed25519) {
      this.step = "gen25519";
      ed25519Key = await fetchEd25519Key(run);
    }
    this.step = "inventory";
    const inventory = await fetchInventory(run, this.answers);
    let csr: Csr | null = null;
    if (features.pki) {
      this.step = "gencsr";
      csr = await fetchCsr(run);
    }

    this.step = "helper";
    // No credentials are asked for an identity two machines answer as.
    this.answers.assertAlone(identity, jwt.claims);
    const claims = jwt.claims ? helperJwtClaims(jwt.claims) : null;
    const response = await runHelper(run, { identity, csr, ed25519_pubkey: ed25519Key, inventory: inventory.encoded, jwt: claims });
    if (response.defer) {
      throw new DeferredError(`configuration defered: ${response.msg}`);
    }
    if (response.shutdown) {
      this.step = "shutdown";
      return { kind: "shutdown", identity, acknowledged: await shutdown(run, response.msg), ...this.presented() };
    }

    let serverJwt: ServerJwt = { jwt: "" };
    if (features.ed25519) {
      this.step = "server_jwt";
      serverJwt = await signServerJwt(run, ed25519Key, response);
    }

    let key: TransportedKey = { encrypted: "", ecdhPublic: "" };
    if (response.key !== "") {
      this.step = "key";
      key = encryptKey(run, jwt.serverEcdhPublic, response.key);
    }

    if (features.upgrades && response.upgrade !== "") {
      this.step = "upgrade";
      if (await upgrade(run, inventory, response.upgrade)) {
        return { kind: "upgrading", identity, fromVersion: inventory.version, toVersion: response.upgrade };
      }
    }

    const issued = issuedCredentials(run, serverJwt, response);
    const credentials = issued && credentialsExpiry(issued);
    this.step = "configure";
    this.answers.stop();
    this.answers.assertAlone(identity, jwt.claims);
    if (issued && credentials) await recordCredentials(this.options.recordCredentials, credentials, issued);
    await configure(run, response, csr, serverJwt.jwt, key);
    this.step = "restart";
    await restartConfigured(run);
    return { kind: "provisioned", identity, ...(credentials ? { credentials } : {}), ...this.presented() };
  }

  private presented(): { provisioningJwt?: ProvisioningJwtExpiry } {
    return this.provisioningJwt ? { provisioningJwt: this.provisioningJwt } : {};
  }
}
