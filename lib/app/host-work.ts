/**
 * Provisioning queued hosts (docs/behaviour.md §6, §7): each message's work is claimed in the
 * registry under the current term, provisioned by the engine (which reads the gate before every
 * RPC attempt and helper run), and finished: recorded, given back for a later delivery, or parked
 * in the host-work DLQ after too many failures in a row at one step.
 */
import { failuresInARow, type HostClaim } from "../admission/claim";
import type { AdmissionRegistry } from "../admission/registry";
import type { CredentialsExpiry } from "../ports/credentials";
import type { IssuanceLedger, IssuedCredentials } from "../ports/issuance-ledger";
import { isSuccessfulOutcome, keepsHostKnown, type ProvisionOutcome } from "../engine/outcome";
import type { ProvisionEngine } from "../engine/provision";
import { IdentityCollisionError } from "../engine/errors";
import { AttemptExceedsLeaseError, LeaseStoreError, LeaseUnconfirmedError, LeaseValidityShortError, messageOf, ProvisionerError } from "../errors";
import type { LeaseGate, Standing } from "../ports/lease-gate";
import { EXTRA_METRIC } from "../ports/metric-names";
import { systemClock, type Clock } from "../ports/clock";
import type { HostWork } from "../ports/host-work";
import type { LogAttributes, Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import { deadLetter, RetryLaterError, runBatch } from "./batch";
import { type BatchRefill } from "./use-case-ports";
import { decodeHostWork } from "./host-work-message";
import type { BatchResult, Broker, InvocationContext, MessageQueue, QueueMessage } from "./use-case-ports";

interface HostWorkSettings {
  /** This deployment's id, as it appears as the holder in the lease item. */
  deploymentId: string;
  /** Hosts provisioned at once (`workers`). */
  workers: number;
  /** Visibility delay of a retried message: base x receive count, capped at max. */
  retry: { baseDelaySeconds: number; maxDelaySeconds: number };
  /** Hard failures in a row at one step after which a host is parked in the host-work DLQ. */
  failureLimit: number;
  /** Ms kept back from the Lambda deadline. */
  deadlineMarginMs: number;
  /** The site (the ledger's records are the site's) and how long the issuance ledger keeps a record (`ledger_retention`). */
  site: string;
  ledgerRetentionMs: number;
}

export interface HostWorkDeps {
  settings: HostWorkSettings;
  gate: Pick<LeaseGate, "standing">;
  registry: Pick<AdmissionRegistry, "begin" | "complete" | "recordFailure" | "retryLater" | "recordCredentials" | "quarantine">;
  engine: Pick<ProvisionEngine, "provision">;
  /** Where every credential issued is recorded before it is sent. */
  ledger: Pick<IssuanceLedger, "record">;
  broker: Pick<Broker, "prepareRpc">;
  hostWork: MessageQueue;
  hostWorkDlq: MessageQueue;
  logger: Logger;
  metrics: Metrics;
  /** Per invocation: more host work from the queue while its batch runs (lib/app/batch.ts BatchRefill). */
  refill?: (remainingMs: () => number) => BatchRefill;
  /** Paces the re-reads after a store blip (STORE_BLIP_PAUSES_MS). */
  clock?: Clock;
}

/**
 * The pauses before the lease is read again (or the host claimed again), inside the same
 * invocation, when the lease store did not answer a round or the admission store a claim (a timeout
 * under load, gone a second later), or a slow keep of the lease left less validity than the attempt needs.
 * Without them every host of the invocation went back to the queue for the whole retry delay (30 s,
 * then 60 s), or was dropped for the next discovery, though nothing was wrong with it. Each re-read
 * is a full gate round, so nothing is sent outside a confirmed term; a store that stays away still
 * sends the work back, after at most these pauses and one more try each.
 */
const STORE_BLIP_PAUSES_MS: readonly number[] = [1_000, 2_000, 4_000, 8_000];

/** Visibility delay before the `receiveCount`-th delivery is retried: base x count, capped. */
function retryDelaySeconds(receiveCount: number, baseSeconds: number, maxSeconds: number): number {
  const count = Number.isFinite(receiveCount) && receiveCount > 0 ? Math.trunc(receiveCount) : 1;
  // SQS accepts at most 12 hours of visibility.
  return Math.min(baseSeconds * count, maxSeconds, 43_200);
}

export class HostWorkProcessor {
  /** Claims whose host had its new credentials recorded: the node may have taken them. */
  private readonly credentialsRecorded = new WeakSet<HostClaim>();

  constructor(private readonly deps: HostWorkDeps) {}

  async handle(messages: readonly QueueMessage[], ctx: InvocationContext): Promise<BatchResult> {
    const remainingMs = () => ctx.remainingMs() - this.deps.settings.deadlineMarginMs;
    const standing = await this.readStanding(remainingMs);
    // Taken work is handled under the standing read here, like the batch: the engine's gate still checks the lease before every RPC.
    const refill = standing.kind === "leading" ? this.deps.refill?.(remainingMs) : undefined;
    return runBatch(messages, Math.max(1, this.deps.settings.workers), (message) => this.handleOne(message, standing, remainingMs), this.deps.logger, refill);
  }

  /**
   * The standing the batch runs under. One the round could not establish (the store did not
   * answer, or our own lease was not confirmed) is read again after each blip pause while the
   * invocation has time for it, before the whole batch is sent back as not known.
   */
  private async readStanding(remainingMs: () => number): Promise<Standing> {
    let standing = this.knownStanding(await this.deps.gate.standing());
    for (const pauseMs of STORE_BLIP_PAUSES_MS) {
      if (standing.kind !== "unknown" || remainingMs() <= pauseMs) break;
      this.deps.logger.info(`the lease standing is not known; reading it again in ${pauseMs} ms`, { error: messageOf(standing.error) });
      await this.clock.sleep(pauseMs);
      standing = this.knownStanding(await this.deps.gate.standing());
    }
    return standing;
  }

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  /**
   * A standby drops its batch, so it must be one for certain: another deployment named as holder,
   * a lease this deployment gave up, or its operator's pause switch on. A "standby" without a lease item, or whose item names this
   * deployment as the live holder, comes from a round that could not tell (e.g. one that completed
   * late); dropping then would lose a leader's batch, so it counts as not known.
   */
  private knownStanding(standing: Standing): Standing {
    if (standing.kind !== "standby" || standing.pausedByOperator) return standing;
    const current = standing.current;
    if (current && (current.holder !== this.deps.settings.deploymentId || current.released)) return standing;
    const why = current ? `the lease item names this deployment (${current.holder}, term ${current.term}) as holder` : "no lease item was read";
    return { kind: "unknown", error: new LeaseStandingUnknownError(`the lease round did not confirm this deployment's standing: ${why}`) };
  }

  private async handleOne(message: QueueMessage, standing: Standing, remainingMs: () => number): Promise<void> {
    const { logger, metrics } = this.deps;
    let work: HostWork;
    try {
      work = decodeHostWork(message.body);
    } catch (error) {
      await deadLetter(this.deps.hostWorkDlq, message, messageOf(error), logger);
      return;
    }
    const attributes = { identity: work.identity, term: work.term, messageId: message.id };
    if (standing.kind === "unknown") {
      // Nothing is known about the lease, so nothing may be dropped: every item goes back with the reason.
      const reason = causedBy(standing.error, LeaseStandingUnknownError)
        ? messageOf(standing.error)
        : `the lease store could not be read: ${messageOf(standing.error)}`;
      await this.delayRedelivery(message, { ...attributes, reason });
      throw new RetryLaterError(`${work.identity}: ${reason}`, { cause: standing.error });
    }
    if (standing.kind === "standby") {
      metrics.count(EXTRA_METRIC.staleWorkDiscarded);
      logger.info("paused: dropping host work, the leader rediscovers the host", { ...attributes, holder: standing.current?.holder });
      return;
    }

    let begun;
    try {
      begun = await this.claimHost(work, standing.term, remainingMs);
    } catch (error) {
      await this.delayRedelivery(message, attributes);
      throw new RetryLaterError(`could not claim ${work.identity}: ${messageOf(error)}`, { cause: error });
    }
    switch (begun.status) {
      case "claimed":
        break;
      case "already-claimed":
        // Another delivery of this work is running; this one comes back after the delay.
        await this.delayRedelivery(message, attributes);
        throw new RetryLaterError(`${work.identity} is being provisioned by another worker`);
      default:
        // stale-term, not-current, waited-too-long, already-provisioned: the registry logged and counted it.
        return;
    }

    const claim = begun.claim;
    try {
      await this.deps.broker.prepareRpc();
    } catch (error) {
      await this.giveBack(claim, message, `the broker could not be reached: ${messageOf(error)}`);
      throw new RetryLaterError(`broker unavailable for ${work.identity}`, { cause: error });
    }
    const options = { remainingMs, recordCredentials: (credentials: CredentialsExpiry, issued: IssuedCredentials) => this.recordCredentials(claim, credentials, issued, remainingMs) };
    let outcome = await this.deps.engine.provision(work, options);
    // The host keeps its claim while the lease store recovers; the engine reads the gate afresh before every attempt.
    for (const pauseMs of STORE_BLIP_PAUSES_MS) {
      if (outcome.kind !== "paused" || !isLeaseStoreBlip(outcome) || remainingMs() <= pauseMs) break;
      logger.info(`the lease could not be confirmed for the attempt; provisioning again in ${pauseMs} ms`, { ...attributes, step: outcome.step, reason: messageOf(outcome.error) });
      await this.clock.sleep(pauseMs);
      outcome = await this.deps.engine.provision(work, options);
    }
    await this.finish(claim, message, outcome, remainingMs);
  }

  /**
   * The claim, tried again after each blip pause when the admission store did not answer: the
   * registry has already given back a claim whose outcome stayed unknown (its token never claims
   * again), so a new claim here is what the next delivery would do, without the retry delay.
   */
  private claimHost(work: HostWork, term: number, remainingMs: () => number) {
    return this.acrossStoreBlips("claim the host", { identity: work.identity, term }, remainingMs, () => this.deps.registry.begin(work, term));
  }

  /**
   * The credentials recorded before they leave: first in the issuance ledger (a credential the
   * helper signed is issued whether or not the node takes it; the record's key is the identity and
   * the credential's id, so writing it again after a lost answer changes nothing), then on our
   * claim (AdmissionRegistry.recordCredentials), which marks them live. Throws when either fails or
   * the claim is no longer ours: nothing is sent then.
   */
  private async recordCredentials(claim: HostClaim, credentials: CredentialsExpiry, issued: IssuedCredentials, remainingMs: () => number): Promise<void> {
    const { identity, term } = claim.work;
    const { site, deploymentId, ledgerRetentionMs } = this.deps.settings;
    const issuance = { ...issued, site, identity, term, deploymentId, kind: claim.renewing ? ("renewal" as const) : ("provision" as const), expiresAt: issued.issuedAt + ledgerRetentionMs };
    await this.acrossStoreBlips("record the issuance in the ledger", { identity, term }, remainingMs, () => this.deps.ledger.record(issuance));
    const recorded = await this.acrossStoreBlips("record the credentials", { identity, term }, remainingMs, () => this.deps.registry.recordCredentials(claim, credentials));
    if (!recorded) throw new ClaimLostError(`the claim on ${identity} ran out before its credentials could be recorded`);
    this.credentialsRecorded.add(claim);
  }

  /** `act`, tried again after each blip pause while it throws and the invocation has time for the pause. */
  private async acrossStoreBlips<T>(what: string, attributes: LogAttributes, remainingMs: () => number, act: () => Promise<T>): Promise<T> {
    for (const pauseMs of STORE_BLIP_PAUSES_MS) {
      try {
        return await act();
      } catch (error) {
        if (remainingMs() <= pauseMs) throw error;
        this.deps.logger.info(`could not ${what}; trying again in ${pauseMs} ms`, { ...attributes, error: messageOf(error) });
        await this.clock.sleep(pauseMs);
      }
    }
    return act();
  }

  private async finish(claim: HostClaim, message: QueueMessage, outcome: ProvisionOutcome, remainingMs: () => number): Promise<void> {
    const { identity, term } = claim.work;
    if (outcome.kind === "deferred" || (outcome.kind === "failed" && outcome.retryable) || (outcome.kind === "paused" && isLeaseStoreBlip(outcome))) {
      // A lease store that could not be read (or a slow keep of the lease) is not a lost lease: the host comes back, with the reason.
      // The reason names the causes: the store's timeout under a pause, the refused connection under an RPC the broker never took.
      const reason = messageOf(outcome.error);
      await this.giveBack(claim, message, reason);
      throw new RetryLaterError(`${identity}: ${reason}`, { cause: outcome.error });
    }
    if (outcome.kind === "failed" && outcome.error instanceof IdentityCollisionError) {
      await this.quarantine(claim, outcome.error, remainingMs);
      return;
    }
    if (outcome.kind === "failed") {
      // A step no lease validity can ever cover is parked at once: it would only fail the same way again.
      await this.recordFailure(claim, message, outcome, causedBy(outcome.error, AttemptExceedsLeaseError));
      return;
    }
    if (outcome.kind === "paused") {
      this.deps.logger.info("paused mid-provisioning; dropping the work, the leader rediscovers the host", { identity, term, step: outcome.step });
      // Paused after the node was sent its configuration: it may be in service on the credentials
      // recorded for it, out of discovery's sight. The host is kept with them, so renewal finds it.
      if (this.credentialsRecorded.has(claim)) return this.keepRecorded(claim, messageOf(outcome.error));
    }
    const keep = isSuccessfulOutcome(outcome) && keepsHostKnown(outcome);
    const credentials = outcome.kind === "provisioned" ? outcome.credentials : undefined;
    const provisioningJwt = keep && "provisioningJwt" in outcome ? outcome.provisioningJwt : undefined;
    try {
      // A provisioned host has left the provisioning broker: no discovery finds it again, so its record is worth the pauses.
      await this.acrossStoreBlips("record the end of provisioning", { identity, term }, remainingMs, () =>
        this.deps.registry.complete(claim, keep ? "provisioned" : "failed", credentials, provisioningJwt),
      );
    } catch (error) {
      // The claim runs out on its own; the next discovery after that admits the host again.
      this.deps.logger.error("could not record the end of provisioning", { identity, term, error });
    }
  }

  /** Two machines answered as the host: it is quarantined (its claim ends there), not failed, and no attempt is made again. */
  private async quarantine(claim: HostClaim, collision: IdentityCollisionError, remainingMs: () => number): Promise<void> {
    const { identity, term, source } = claim.work;
    this.deps.logger.error(`quarantined ${identity}: ${collision.evidence.reason}; release it with choria-provisioner quarantine release once resolved`, {
      identity,
      term,
      senders: JSON.stringify(collision.evidence.senders),
    });
    try {
      await this.acrossStoreBlips("quarantine the host", { identity, term }, remainingMs, () => this.deps.registry.quarantine(identity, collision.evidence, term, source));
    } catch (error) {
      // The claim runs out on its own; the next discovery or event admits the host and the check runs again.
      this.deps.logger.error("could not record the quarantine", { identity, term, error });
    }
  }

  private async keepRecorded(claim: HostClaim, reason: string): Promise<void> {
    const { identity, term } = claim.work;
    try {
      if (!(await this.deps.registry.retryLater(claim, reason))) this.deps.logger.warn("the claim ran out before the host could be kept with its credentials", { identity, term });
    } catch (error) {
      this.deps.logger.error("could not keep the host with its credentials; its claim runs out on its own and renewal takes it then", { identity, term, error });
    }
  }

  /**
   * A hard failure: the host may be admitted again by the next discovery or event, until it has
   * failed at the same step `failureLimit` times in a row. Then its work goes to the DLQ with the
   * last error and the host is parked, so a broken helper or node cannot spin for ever unnoticed.
   */
  private async recordFailure(claim: HostClaim, message: QueueMessage, failed: Extract<ProvisionOutcome, { kind: "failed" }>, parkNow = false): Promise<void> {
    const { logger } = this.deps;
    const { identity, term } = claim.work;
    const { step, error, provisioningJwt } = failed;
    const failures = failuresInARow(claim, step);
    const reason = `${step}: ${messageOf(error)}`;
    let park = parkNow || failures >= this.deps.settings.failureLimit;
    if (park) {
      try {
        await deadLetter(this.deps.hostWorkDlq, message, reason, logger, { identity, step, failures: String(failures), term: String(term) });
        this.deps.metrics.count(EXTRA_METRIC.hostsParked);
        logger.error(`parked ${identity} after ${failures} failures in a row at step ${step}`, { identity, term, step, failures, reason, error });
      } catch (dlqError) {
        park = false;
        logger.error("could not dead-letter the work of a failing host; it is retried instead of parked", {
          identity,
          term,
          error: dlqError,
        });
      }
    }
    try {
      if (!(await this.deps.registry.recordFailure(claim, { step, reason, failures, park, ...(provisioningJwt ? { provisioningJwt } : {}) }))) {
        logger.warn("the claim ran out before the failure could be recorded", { identity, term, step });
      }
    } catch (storeError) {
      // The claim runs out on its own; the next discovery after that admits the host again.
      logger.error("could not record the failure", { identity, term, step, error: storeError });
    }
  }

  /** Gives the claim back with the reason (shown by status) and delays the message's next delivery. */
  private async giveBack(claim: HostClaim, message: QueueMessage, reason: string): Promise<void> {
    const { identity, term } = claim.work;
    try {
      if (!(await this.deps.registry.retryLater(claim, reason))) {
        this.deps.logger.warn("the claim ran out before it could be given back", { identity, term });
      }
    } catch (error) {
      this.deps.logger.error("could not give the claim back; it runs out on its own", { identity, term, error });
    }
    await this.delayRedelivery(message, { identity, term, messageId: message.id, reason });
  }

  private async delayRedelivery(message: QueueMessage, attributes: LogAttributes): Promise<void> {
    const { retry } = this.deps.settings;
    const seconds = retryDelaySeconds(message.receiveCount, retry.baseDelaySeconds, retry.maxDelaySeconds);
    this.deps.logger.info(`host work goes back to the queue for ${seconds}s`, { ...attributes, receiveCount: message.receiveCount });
    try {
      await this.deps.hostWork.delay(message.receiptHandle, seconds);
    } catch (error) {
      this.deps.logger.warn("could not delay the message; it returns after the queue's visibility timeout", {
        ...attributes,
        error: messageOf(error),
      });
    }
  }
}

/** Our claim on a host is gone (it ran out, another worker took it over): nothing more is sent for it. */
class ClaimLostError extends ProvisionerError {}

/** A lease round answered "standby" without showing another holder: the batch goes back. */
class LeaseStandingUnknownError extends ProvisionerError {}

/**
 * The gate closed for a moment, not because the lease was lost: the lease store could not be read,
 * a keep of the lease that answered slowly left less validity than the attempt needs, or a round could not
 * confirm the lease the item shows this deployment holding.
 */
function isLeaseStoreBlip(outcome: ProvisionOutcome): boolean {
  return (
    outcome.kind === "paused" &&
    [LeaseStoreError, LeaseValidityShortError, LeaseUnconfirmedError].some((kind) => causedBy(outcome.error, kind))
  );
}

/** Whether `kind` is the error or anywhere in its cause chain. */
function causedBy(error: unknown, kind: abstract new (...args: never[]) => Error): boolean {
  for (let current = error, depth = 0; current !== undefined && depth < 10; current = (current as { cause?: unknown }).cause, depth++) {
    if (current instanceof kind) return true;
  }
  return false;
}
