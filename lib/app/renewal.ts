/**
 * Fleet renewal (docs/renewal.md): before a provisioned host's certificate or server JWT expires,
 * the leader sends it `choria_provision#reprovision` on the main broker; the node rewrites its
 * configuration to provisioning mode and restarts, and the provisioning pipeline gives it fresh
 * credentials. Each run (the scheduled `renew` function) does, under the term it leads with:
 *
 * 1. settle the hosts in flight: provisioned again since the send is a success; not provisioned
 *    within `timeoutMs`, or (unanswered) still on its old credentials after `unansweredHoldMs`, is
 *    a failure;
 * 2. pause itself, saying why, when more than `failureThreshold` of the last `failureWindow`
 *    renewed hosts failed, or when the wave's abort rule says so (the operator resumes it);
 * 3. send the operator's requested hosts, then the hosts due, soonest expiry first, within the
 *    rate (requests that left in the last minute, answered or not; slow start ramps it) and the
 *    bound on hosts in flight; the due hosts only inside a maintenance window and outside every
 *    freeze, unless a host would expire before the next allowed moment (docs/renewal.md, "Change
 *    control").
 *
 * A failed host is never given up on while its credentials are valid: its registry entry records
 * the failure and when to try again (`retryMark`), and it is due again then. The registry and this
 * state live in the site's admission table, shared by all its deployments, so a new leader carries
 * on where the old one stopped.
 *
 * Every send reads the pause gate first, as every provisioning RPC does: a deposed leader sends
 * nothing once the gate closes, and the request's envelope time is the gate check's, so a node
 * runs it only inside the delivery horizon. A host is reserved in flight before its request
 * leaves, so a crash never puts more hosts out of service than the bound.
 */
import type { RenewalMark } from "../ports/credentials";
import type { AdmissionRegistry } from "../admission/registry";
import type { HostExpiry } from "../admission/site-listing";
import { AttemptExceedsLeaseError, messageOf, PausedError, RpcNotSentError, RpcStatusError } from "../errors";
import { rpcWithRetries } from "../engine/retry";
import { AGENT_TIMEOUT_MS, DISCOVERY_TIMEOUT_MS } from "../engine/plan";
import type { LeaseGate } from "../ports/lease-gate";
import { EXTRA_METRIC } from "../ports/metric-names";
import type { ChoriaRpc } from "../ports/rpc";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import { mapLimited } from "./concurrency";
import { capacitySettings, renewalCapacity } from "./renewal-capacity";
import { RENEW_RUN_MS } from "../config/renew-capacity";
import type { RenewCalendar } from "../config/renew-calendar";
import type { InvocationContext } from "./use-case-ports";
import { dueHosts, openedHosts, provisionedSince, renewableAt, requestedHosts, retryMark, updateRenewalState, type RenewBefore } from "./renewal-state";
import { type RenewalOutcome, type RenewalState, type RenewalStore, type RenewalWave } from "./use-case-ports";

const REPROVISION_RPC = "choria_provision#reprovision";
/** One reprovision attempt: the Go client's discovery timeout plus the agent's DDL timeout. */
const REPROVISION_TIMEOUT_MS = DISCOVERY_TIMEOUT_MS + AGENT_TIMEOUT_MS.choria_provision;
/** Requests in flight on the broker at once within one run. */
const SEND_CONCURRENCY = 32;
const MINUTE_MS = 60_000;
/** How far ahead a run looks for the next allowed moment when a window is closed (a freeze lasts at most 31 days). */
const NEXT_ALLOWED_WITHIN_MS = 32 * 24 * 3_600_000;

/** How long an unanswered host may take to show up in provisioning: two discoveries and the request's own wait. */
export function unansweredHoldFor(discoveryIntervalMs: number): number {
  return 2 * discoveryIntervalMs + REPROVISION_TIMEOUT_MS;
}

interface RenewalSettings {
  site: string;
  /** Automatic renewal (`renew.enabled`); an operator's request is carried out either way. */
  enabled: boolean;
  before: RenewBefore;
  ratePerMinute: number;
  maxInFlight: number;
  /** A renewed host must be provisioned again within this (`renew.timeout`). */
  timeoutMs: number;
  /**
   * A host that did not answer and is still provisioned on its old credentials this long after the
   * send did not act on it (a restarted node is rediscovered within two discovery intervals).
   */
  unansweredHoldMs: number;
  /** Renewal pauses when more than this many of the last `failureWindow` renewed hosts failed. */
  failureThreshold: number;
  failureWindow: number;
  /** When automatic renewal may send (`renew.windows`, `renew.freezes`); absent: at any time. */
  calendar?: RenewCalendar;
  /** `renew.start_rate` and how the rate ramps from it to `ratePerMinute`; absent: no ramp. */
  slowStart?: { startRate: number; increase: number; successesPerStep: number };
  /** Pause when this percentage of a wave's hosts failed, once `minAttempts` were tried (`renew.abort_*`). */
  abort?: { percentage: number; minAttempts: number };
  /** The provisioning token the node's choria_provision agent checks. Secret. */
  token: string;
  /** Ms kept back from the Lambda deadline. */
  deadlineMarginMs: number;
}

export interface RenewalDeps {
  settings: RenewalSettings;
  gate: Pick<LeaseGate, "standing" | "assertOpen">;
  registry: Pick<AdmissionRegistry, "expiries" | "markRenewal">;
  store: RenewalStore;
  /** Direct RPC on the main broker, to the target collective. */
  rpc: ChoriaRpc;
  /** Makes `rpc` use a live connection; called before the first send of a run. */
  prepareRpc(): Promise<void>;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

export type RenewalRunResult =
  | { status: "standby" | "lease-unknown" }
  | {
      status: "ran" | "paused";
      term: number;
      /** Hosts sent reprovision that accepted it. */
      sent: string[];
      /** Hosts sent reprovision that gave no answer (they stay in flight). */
      unanswered: string[];
      refused: Array<{ identity: string; reason: string }>;
      /** Hosts provisioned again since their renewal. */
      completed: string[];
      /** Hosts in flight that did not come back (tried again later). */
      timedOut: string[];
      inFlight: number;
      pausedBecause?: string;
    };

/** A host whose renewal failed, why, and when it is tried again. */
interface Failure {
  host: HostExpiry;
  reason: string;
  mark: RenewalMark;
}

export class Renewal {
  constructor(private readonly deps: RenewalDeps) {}

  async run(ctx: InvocationContext): Promise<RenewalRunResult> {
    const { settings, clock, logger, metrics } = this.deps;
    const standing = await this.deps.gate.standing();
    if (standing.kind === "unknown") {
      logger.warn("renewal skipped: the lease store could not be read", { error: messageOf(standing.error) });
      return { status: "lease-unknown" };
    }
    if (standing.kind === "standby") return { status: "standby" };
    const term = standing.term;

    const hosts = await this.deps.registry.expiries();
    const byIdentity = new Map(hosts.map((host) => [host.identity, host]));
    const now = clock.now();
    const completed: string[] = [];
    const timedOut: Failure[] = [];

    // 1 and 2, and the hosts this run sends, reserved in flight in the same write.
    const { state, result: chosen } = await updateRenewalState(this.deps.store, settings.site, (state) => {
      completed.length = 0;
      timedOut.length = 0;
      // The mark an operator's request looks for: a leader's run is here to carry it out.
      state.lastRun = { at: now, term };
      this.settle(state, byIdentity, now, completed, timedOut);
      this.pauseIfFailing(state, now);
      if (state.paused) return { hosts: [], outsideWindow: [] };
      // A host that failed just now waits for its retry like one that failed in an earlier run.
      const marked = new Map(timedOut.map((failure) => [failure.host.identity, failure.mark]));
      const current = hosts.map((host) => (marked.has(host.identity) ? { ...host, renewal: marked.get(host.identity) as RenewalMark } : host));
      const picked = this.pick(state, current, term, now);
      for (const host of picked.hosts) state.inFlight[host.identity] = { sentAt: now, term, expiresAt: host.credentials.expiresAt, ...(host.renewal ? { retry: true } : {}) };
      return picked;
    });
    this.observeFleet(hosts, state, now);
    for (const identity of completed) logger.info("renewed host is provisioned again", { identity, term });
    for (const { host, reason } of timedOut) logger.error(`renewal of ${host.identity} failed: ${reason}; tried again later`, { identity: host.identity, term });
    if (completed.length > 0) metrics.count(EXTRA_METRIC.renewalsCompleted, completed.length);
    if (timedOut.length > 0) metrics.count(EXTRA_METRIC.renewalFailures, timedOut.length);
    await this.markForRetry(timedOut);

    const sends = chosen.hosts.length === 0 ? [] : await this.send(chosen.hosts, term, ctx);
    const final = await this.recordSends(sends, term, now);
    const refused = sends.flatMap((send) => (send.kind === "refused" ? [{ host: send.host, reason: send.reason, mark: retryMark(send.host, send.reason, send.sentAt) }] : []));
    await this.markForRetry(refused);
    this.reportOutsideWindow(sends, new Set(chosen.outsideWindow), term);
    return this.summarise(state, final, sends, { term, completed, timedOut });
  }

  /** Records what left: answered or not, each request counts toward the rate; a refusal frees its host's place in flight. */
  private async recordSends(sends: SendResult[], term: number, reservedAt: number): Promise<RenewalState> {
    const { settings, clock } = this.deps;
    const { state } = await updateRenewalState(this.deps.store, settings.site, (latest) => {
      for (const send of sends) {
        const held = latest.inFlight[send.host.identity];
        // A reservation of another run (or term) is not this run's to change.
        if (held?.term !== term || held.sentAt !== reservedAt) continue;
        if (send.kind === "not-sent") {
          delete latest.inFlight[send.host.identity];
          continue;
        }
        latest.sends.push(send.sentAt);
        if (send.kind === "refused") {
          delete latest.inFlight[send.host.identity];
          record(latest, { identity: send.host.identity, ok: false, at: send.sentAt, reason: send.reason }, settings.failureWindow);
          this.countInWave(latest, { identity: send.host.identity, reason: send.reason }, held.retry === true);
          continue;
        }
        held.sentAt = send.sentAt;
        if (send.kind === "unanswered") held.unanswered = true;
      }
      latest.sends = latest.sends.filter((at) => at > clock.now() - MINUTE_MS);
      this.pauseIfFailing(latest, clock.now());
    });
    return state;
  }

  private summarise(before: RenewalState, after: RenewalState, sends: SendResult[], run: { term: number; completed: string[]; timedOut: Failure[] }): RenewalRunResult {
    const { logger, metrics } = this.deps;
    const of = (kind: SendResult["kind"]) => sends.filter((send) => send.kind === kind).map((send) => send.host.identity);
    const refused = sends.flatMap((send) => (send.kind === "refused" ? [{ identity: send.host.identity, reason: send.reason }] : []));
    const left = sends.filter((send) => send.kind !== "not-sent").length;
    if (left > 0) metrics.count(EXTRA_METRIC.renewalsSent, left);
    if (refused.length > 0) metrics.count(EXTRA_METRIC.renewalFailures, refused.length);
    for (const refusal of refused) logger.error(`${refusal.identity} refused reprovision: ${refusal.reason}; tried again later`, { identity: refusal.identity, term: run.term });
    const paused = after.paused;
    metrics.gauge(EXTRA_METRIC.renewalPaused, paused ? 1 : 0);
    metrics.gauge(EXTRA_METRIC.renewalsInFlight, Object.keys(after.inFlight).length);
    metrics.gauge(EXTRA_METRIC.renewalRate, this.rateNow(after));
    if (paused && !before.paused) logger.error(`renewal paused itself: ${paused.reason}`, { term: run.term });
    return {
      status: paused ? "paused" : "ran",
      term: run.term,
      sent: of("sent"),
      unanswered: of("unanswered"),
      refused,
      completed: run.completed,
      timedOut: run.timedOut.map((failure) => failure.host.identity),
      inFlight: Object.keys(after.inFlight).length,
      ...(paused ? { pausedBecause: paused.reason } : {}),
    };
  }

  /** The site's credentials as the alarms see them: hosts at risk of expiring, hosts expired, and whether renewal keeps up. */
  private observeFleet(hosts: readonly HostExpiry[], state: RenewalState, now: number): void {
    const { metrics, logger, settings } = this.deps;
    const capacity = renewalCapacity(hosts, now, capacitySettings(settings, state), new Set(Object.keys(state.inFlight)));
    metrics.gauge(EXTRA_METRIC.renewalHostsAtRisk, capacity.hostsAtRisk);
    metrics.gauge(EXTRA_METRIC.credentialsExpired, hosts.filter((host) => host.credentials.expiresAt <= now).length);
    metrics.gauge(EXTRA_METRIC.renewalCapacityShortfall, capacity.shortfallPerMinute);
    if (!capacity.canKeepUp && settings.enabled) {
      logger.error(
        `renewal cannot keep up: ${capacity.hostsThatWouldExpire} hosts would expire before they are renewed; it needs ${capacity.requiredRatePerMinute} sends a minute and sustains ${capacity.ratePerMinute.toFixed(2)} (${capacity.limitedBy})`,
        { firstMissIdentity: capacity.firstMissIdentity, firstMissAt: capacity.firstMissAt },
      );
    }
  }

  /** Leaves each failed host's entry a retry mark; a mark that cannot be written leaves the host due at once instead. */
  private async markForRetry(failures: readonly Failure[]): Promise<void> {
    await mapLimited(failures, SEND_CONCURRENCY, async ({ host, mark }) => {
      try {
        await this.deps.registry.markRenewal(host, mark);
      } catch (error) {
        this.deps.logger.warn("could not record a failed renewal on the host; it is due again at once", { identity: host.identity, error: messageOf(error) });
      }
    });
  }

  /** Settles the hosts in flight against what the registry says now. */
  private settle(state: RenewalState, hosts: Map<string, HostExpiry>, now: number, completed: string[], failed: Failure[]): void {
    const { timeoutMs, unansweredHoldMs, failureWindow } = this.deps.settings;
    for (const [identity, held] of Object.entries(state.inFlight)) {
      const host = hosts.get(identity);
      let reason: string | undefined;
      if (provisionedSince(host, held.sentAt)) {
        delete state.inFlight[identity];
        record(state, { identity, ok: true, at: now, outOfServiceMs: now - held.sentAt }, failureWindow);
        this.countInWave(state, undefined, held.retry === true);
        completed.push(identity);
        continue;
      }
      const waited = now - held.sentAt;
      if (held.unanswered && host?.state === "provisioned" && waited > unansweredHoldMs) {
        reason = `did not answer reprovision and was still on its old credentials ${Math.round(waited / 1000)}s later`;
      } else if (waited > timeoutMs) reason = `not provisioned again within ${timeoutMs / 1000}s of its reprovision request`;
      if (reason === undefined) continue;
      delete state.inFlight[identity];
      record(state, { identity, ok: false, at: now, reason }, failureWindow);
      this.countInWave(state, { identity, reason }, held.retry === true);
      if (host) failed.push({ host, reason, mark: retryMark(host, reason, now) });
    }
  }

  /**
   * One pause, two rules: the breaker over the last `failureWindow` renewals across waves (a steady
   * trickle of failures, or a sudden break late in a long wave), and the abort rule over the wave's
   * first attempts (a failure share the breaker's window would take too long to see, judged only
   * once the sample is large enough to mean something).
   */
  private pauseIfFailing(state: RenewalState, now: number): void {
    if (state.paused) return;
    const { failureThreshold, failureWindow } = this.deps.settings;
    const failures = state.recent.filter((outcome) => !outcome.ok);
    if (failures.length > failureThreshold) {
      const last = failures.at(-1);
      state.paused = {
        reason: `${failures.length} of the last ${state.recent.length} renewed hosts failed (more than ${failureThreshold} of ${failureWindow}); last: ${last?.identity}: ${last?.reason ?? "unknown"}`,
        at: now,
      };
      return;
    }
    const { abort } = this.deps.settings;
    const wave = state.wave;
    if (!abort || !wave || wave.attempts < abort.minAttempts) return;
    // A refusal shows at once, a success only once the node is back: so the hosts still in flight
    // count as renewed, and the wave aborts only when even that leaves the share at the threshold.
    const pending = Object.values(state.inFlight).filter((held) => !held.retry).length;
    if (wave.failures * 100 < abort.percentage * (wave.attempts + pending)) return;
    const share = (part: number, whole: number) => Math.round((part * 1_000) / whole) / 10;
    state.paused = {
      reason:
        `aborted: ${wave.failures} of the ${wave.attempts} hosts tried in this renewal wave failed (${share(wave.failures, wave.attempts)}%; ` +
        `${share(wave.failures, wave.attempts + pending)}% were all ${pending} in flight renewed), at or above renew.abort_percentage ${abort.percentage} ` +
        `once renew.abort_min_attempts ${abort.minAttempts} were tried; last: ${wave.lastFailure?.identity}: ${wave.lastFailure?.reason}`,
      at: now,
    };
  }

  /** The automatic send rate now: `renew.rate`, or where slow start has ramped to in this wave. */
  private rateNow(state: Pick<RenewalState, "wave">): number {
    const { slowStart, ratePerMinute } = this.deps.settings;
    if (!slowStart) return ratePerMinute;
    return Math.min(ratePerMinute, state.wave?.ratePerMinute ?? slowStart.startRate);
  }

  /** Counts an outcome in the wave (`failure` undefined: a success): a first attempt toward the abort rule, a success toward the next step of the ramp. */
  private countInWave(state: RenewalState, failure: { identity: string; reason: string } | undefined, retry: boolean): void {
    const wave = state.wave;
    if (!wave) return;
    const ok = failure === undefined;
    if (!retry) {
      wave.attempts++;
      if (failure) {
        wave.failures++;
        wave.lastFailure = failure;
      }
    }
    const { slowStart, ratePerMinute } = this.deps.settings;
    if (!ok || !slowStart) return;
    wave.successes++;
    while (wave.successes >= slowStart.successesPerStep && wave.ratePerMinute < ratePerMinute) {
      wave.successes -= slowStart.successesPerStep;
      wave.ratePerMinute = Math.min(ratePerMinute, Math.max(wave.ratePerMinute + 1, Math.floor(wave.ratePerMinute * slowStart.increase)));
    }
  }

  /** A wave starts with the first send after renewal was idle, and ends at a run with nothing in flight, nothing pending (due or waiting for a retry) and no request. */
  private trackWave(state: RenewalState, picked: number, pending: number, now: number): void {
    if (picked > 0) {
      state.wave ??= { startedAt: now, ratePerMinute: this.rateNow(state), successes: 0, attempts: 0, failures: 0 } satisfies RenewalWave;
    } else if (pending === 0 && !state.request && Object.keys(state.inFlight).length === 0) delete state.wave;
  }

  /**
   * The hosts renewal may send now. Inside a window and outside every freeze: the due hosts, and
   * those whose renewal window has opened but whose place in it comes too late for the next window
   * (so they go in this one). Otherwise only the due hosts that could not wait for the next allowed
   * moment and still be back before their credentials expire ("renew anyway before expiry": no
   * credential expires because of a window); with windows checked at load, only late ones (retries).
   */
  private allowedNow(hosts: readonly HostExpiry[], state: RenewalState, now: number): { allowed: readonly HostExpiry[]; due: number; outsideWindow: boolean } {
    const { calendar, timeoutMs, before } = this.deps.settings;
    const cannotWaitFor = (moment: number | undefined) => (host: HostExpiry) => host.credentials.expiresAt - timeoutMs - RENEW_RUN_MS < (moment ?? Number.POSITIVE_INFINITY);
    const closesAt = calendar?.restricted && calendar.allowedAt(now) ? calendar.nextClosed(now, NEXT_ALLOWED_WITHIN_MS) : undefined;
    if (calendar?.restricted && closesAt !== undefined) {
      const tooLate = cannotWaitFor(calendar.nextAllowed(closesAt, NEXT_ALLOWED_WITHIN_MS));
      // Every due host is among these (its place came), so they are also what is pending.
      const allowed = openedHosts(hosts, state, before, now).filter((host) => renewableAt(host, before) <= now || tooLate(host));
      return { allowed, due: allowed.length, outsideWindow: false };
    }
    const due = dueHosts(hosts, state, before, now);
    if (!calendar?.restricted || calendar.allowedAt(now)) return { allowed: due, due: due.length, outsideWindow: false };
    return { allowed: due.filter(cannotWaitFor(calendar.nextAllowed(now, NEXT_ALLOWED_WITHIN_MS))), due: due.length, outsideWindow: true };
  }

  /** Logs and counts the renewals that left outside the windows under the fallback. */
  private reportOutsideWindow(sends: readonly SendResult[], outsideWindow: ReadonlySet<string>, term: number): void {
    const left = sends.filter((send) => send.kind !== "not-sent" && outsideWindow.has(send.host.identity));
    if (left.length === 0) return;
    this.deps.metrics.count(EXTRA_METRIC.renewalsOutsideWindow, left.length);
    for (const send of left) {
      this.deps.logger.warn("renewed outside the maintenance windows: its credentials would expire before the next allowed moment", {
        identity: send.host.identity,
        term,
        expiresAt: send.host.credentials.expiresAt,
      });
    }
  }

  /** The operator's requested hosts first, then the due ones, within the rate and the in-flight bound. */
  private pick(state: RenewalState, hosts: readonly HostExpiry[], term: number, now: number): { hosts: HostExpiry[]; outsideWindow: string[] } {
    const { settings, logger } = this.deps;
    if (state.request && state.request.term !== term) {
      logger.warn("dropping an operator's renewal request of an earlier term", { requestTerm: state.request.term, term });
      delete state.request;
    }
    const rate = state.request?.ratePerMinute ?? this.rateNow(state);
    const sentLastMinute = state.sends.filter((at) => at > now - MINUTE_MS).length;
    const budget = Math.min(rate - sentLastMinute, settings.maxInFlight - Object.keys(state.inFlight).length);
    const picked: HostExpiry[] = [];
    const request = state.request;
    if (request) {
      request.acceptedAt ??= now;
      const wanted = requestedHosts(hosts, state, request, now);
      if (wanted.remaining === 0) delete state.request;
      picked.push(...wanted.sendable.slice(0, Math.max(0, budget)));
    }
    const { allowed, due, outsideWindow } = settings.enabled ? this.allowedNow(hosts, state, now) : { allowed: [], due: 0, outsideWindow: false };
    const taken = new Set(picked.map((host) => host.identity));
    for (const host of allowed) {
      if (picked.length >= budget) break;
      if (!taken.has(host.identity)) picked.push(host);
    }
    // A failed host waiting for its retry keeps the wave going: its failure stays in the wave's sample.
    const retrying = hosts.some((host) => host.renewal !== undefined && host.credentials.expiresAt > now);
    this.trackWave(state, picked.length, due + (retrying ? 1 : 0), now);
    return { hosts: picked, outsideWindow: outsideWindow ? allowed.map((host) => host.identity) : [] };
  }

  private async send(hosts: readonly HostExpiry[], term: number, ctx: InvocationContext): Promise<SendResult[]> {
    const { logger } = this.deps;
    try {
      await this.deps.prepareRpc();
    } catch (error) {
      logger.error("renewal could not reach the main broker; nothing sent", { error });
      return hosts.map((host) => ({ kind: "not-sent", host }));
    }
    let stopped = false;
    return mapLimited(hosts, SEND_CONCURRENCY, async (host): Promise<SendResult> => {
      if (stopped) return { kind: "not-sent", host };
      const sent = await this.sendOne(host, term, ctx);
      if (sent.kind === "gate-closed") {
        stopped = true;
        return { kind: "not-sent", host };
      }
      return sent;
    });
  }

  /** One reprovision request; what became of it, as far as this side can tell. */
  private async sendOne(host: HostExpiry, term: number, ctx: InvocationContext): Promise<SendResult | { kind: "gate-closed" }> {
    const { settings, clock, logger, metrics, gate, rpc } = this.deps;
    const identity = host.identity;
    let stampedAt: number | undefined;
    try {
      await rpcWithRetries({
        gate,
        term,
        clock,
        metrics,
        logger,
        remainingMs: () => ctx.remainingMs() - settings.deadlineMarginMs,
        identity,
        rpc: REPROVISION_RPC,
        // Not retried: a node that took the first request is restarting, and a second one finds it in provisioning mode.
        tries: 1,
        attemptTimeoutMs: REPROVISION_TIMEOUT_MS,
        call: async (_try, window) => {
          stampedAt = window.stampedAt;
          return rpc.call({
            identity,
            agent: "choria_provision",
            action: "reprovision",
            data: { token: settings.token },
            timeoutMs: REPROVISION_TIMEOUT_MS,
            sendWithinMs: window.endsBy - AGENT_TIMEOUT_MS.choria_provision - clock.monotonic(),
            gateCheckedMsAgo: Math.max(0, clock.now() - window.stampedAt),
          });
        },
      });
      logger.info("sent reprovision to renew the host's credentials", { identity, term, expiresAt: host.credentials.expiresAt });
      return { kind: "sent", host, sentAt: stampedAt ?? clock.now() };
    } catch (error) {
      if (error instanceof PausedError || error instanceof AttemptExceedsLeaseError) {
        logger.info("renewal stops: the pause gate closed", { identity, term, reason: messageOf(error) });
        return { kind: "gate-closed" };
      }
      if (causedBy(error, RpcNotSentError) || stampedAt === undefined) {
        // The send-by instant passed before the request could leave: nothing reached the node.
        logger.warn("reprovision not sent before its send-by instant; the host stays due", { identity, term, reason: messageOf(error) });
        return { kind: "not-sent", host };
      }
      const status = causedBy(error, RpcStatusError);
      if (status) return { kind: "refused", host, sentAt: stampedAt, reason: `${status.statusmsg} (status ${status.statuscode})` };
      logger.warn("reprovision got no answer; the host stays in flight until it comes back or shows it did not act", { identity, term, reason: messageOf(error) });
      return { kind: "unanswered", host, sentAt: stampedAt };
    }
  }
}

type SendResult =
  | { kind: "sent" | "unanswered"; host: HostExpiry; sentAt: number }
  | { kind: "refused"; host: HostExpiry; sentAt: number; reason: string }
  | { kind: "not-sent"; host: HostExpiry };

/** Keeps the last `window` outcomes, one per host: a host retried many times counts once toward the pause. */
function record(state: RenewalState, outcome: RenewalOutcome, window: number): void {
  state.recent = state.recent.filter((earlier) => earlier.identity !== outcome.identity);
  state.recent.push(outcome);
  if (state.recent.length > window) state.recent.splice(0, state.recent.length - window);
}

/** `kind` anywhere in the cause chain (the retry wrapper wraps the attempt's error). */
function causedBy<E extends Error>(error: unknown, kind: abstract new (...args: never[]) => E): E | undefined {
  for (let current = error, depth = 0; current !== undefined && depth < 10; current = (current as { cause?: unknown }).cause, depth++) {
    if (current instanceof kind) return current;
  }
  return undefined;
}
