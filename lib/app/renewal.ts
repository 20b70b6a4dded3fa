/**
 * Fleet renewal (docs/renewal.md): before a provisioned host's certificate or server JWT expires,
 * the leader sends it `choria_provision#reprovision` on the main broker; the node rewrites its
 * configuration to provisioning mode and restarts, and the provisioning pipeline gives it fresh
 * credentials. Each run (the scheduled `renew` function) does, under the term it leads with:
 *
 * 1. settle the hosts in flight: provisioned again since the send is a success; not provisioned
 *    within `timeoutMs` is a failure, marked, counted and logged;
 * 2. pause itself, saying why, when more than `failureThreshold` of the last `failureWindow`
 *    renewals failed (the operator resumes it);
 * 3. send the operator's requested hosts, then the hosts due, soonest expiry first, within the
 *    rate (sends in the last minute) and the bound on hosts in flight.
 *
 * Every send reads the pause gate first, as every provisioning RPC does: a deposed leader sends
 * nothing once the gate closes, and the request's envelope time is the gate check's, so a node
 * runs it only inside the delivery horizon. A host is reserved in flight before its request
 * leaves, so a crash never puts more hosts out of service than the bound.
 */
import type { AdmissionRegistry, HostExpiry } from "../admission/registry";
import { AttemptExceedsLeaseError, messageOf, PausedError, RpcNotSentError, RpcStatusError } from "../errors";
import { rpcWithRetries } from "../engine/retry";
import { AGENT_TIMEOUT_MS, DISCOVERY_TIMEOUT_MS } from "../engine/plan";
import type { LeaseGate } from "../lease/gate";
import { EXTRA_METRIC, type ChoriaRpc, type Clock, type Logger, type Metrics } from "../ports";
import { mapLimited } from "./concurrency";
import type { InvocationContext } from "./use-case-ports";
import {
  dueHosts,
  provisionedSince,
  updateRenewalState,
  type RenewalOutcome,
  type RenewalState,
  type RenewalStore,
  type RenewBefore,
} from "./renewal-state";

const REPROVISION_RPC = "choria_provision#reprovision";
/** One reprovision attempt: the Go client's discovery timeout plus the agent's DDL timeout. */
const REPROVISION_TIMEOUT_MS = DISCOVERY_TIMEOUT_MS + AGENT_TIMEOUT_MS.choria_provision;
/** Requests in flight on the broker at once within one run. */
const SEND_CONCURRENCY = 32;
const MINUTE_MS = 60_000;

export interface RenewalSettings {
  site: string;
  /** Automatic renewal (`renew.enabled`); an operator's request is carried out either way. */
  enabled: boolean;
  before: RenewBefore;
  ratePerMinute: number;
  maxInFlight: number;
  /** A renewed host must be provisioned again within this (`renew.timeout`). */
  timeoutMs: number;
  /** Renewal pauses when more than this many of the last `failureWindow` renewals failed. */
  failureThreshold: number;
  failureWindow: number;
  /** The provisioning token the node's choria_provision agent checks. Secret. */
  token: string;
  /** Ms kept back from the Lambda deadline. */
  deadlineMarginMs: number;
}

export interface RenewalDeps {
  settings: RenewalSettings;
  gate: Pick<LeaseGate, "standing" | "assertOpen">;
  registry: Pick<AdmissionRegistry, "expiries">;
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
      refused: Array<{ identity: string; reason: string }>;
      /** Hosts provisioned again since their renewal. */
      completed: string[];
      /** Hosts not provisioned again within the bound. */
      timedOut: string[];
      inFlight: number;
      pausedBecause?: string;
    };

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
    const timedOut: string[] = [];

    // 1 and 2, and the hosts this run sends, reserved in flight in the same write.
    const { state, result: chosen } = await updateRenewalState(this.deps.store, settings.site, (state) => {
      completed.length = 0;
      timedOut.length = 0;
      this.settle(state, byIdentity, now, completed, timedOut);
      this.pauseIfFailing(state, now);
      if (state.paused) return [];
      const picked = this.pick(state, hosts, term, now);
      for (const host of picked) state.inFlight[host.identity] = { sentAt: now, term, expiresAt: host.credentials.expiresAt };
      return picked;
    });
    for (const identity of completed) logger.info("renewed host is provisioned again", { identity, term });
    for (const identity of timedOut) logger.error(`renewed host ${identity} was not provisioned again within ${settings.timeoutMs / 1000}s`, { identity, term });
    if (completed.length > 0) metrics.count(EXTRA_METRIC.renewalsCompleted, completed.length);
    if (timedOut.length > 0) metrics.count(EXTRA_METRIC.renewalFailures, timedOut.length);
    metrics.gauge(EXTRA_METRIC.renewalPaused, state.paused ? 1 : 0);

    const sends = chosen.length === 0 ? [] : await this.send(chosen, term, ctx);
    const sent = sends.filter((send) => send.kind === "sent");
    const refused = sends.flatMap((send) => (send.kind === "refused" ? [{ identity: send.identity, reason: send.reason }] : []));
    const final = await updateRenewalState(this.deps.store, settings.site, (latest) => {
      for (const send of sends) {
        const held = latest.inFlight[send.identity];
        // A reservation of another run (or term) is not this run's to change.
        if (held?.term !== term || held.sentAt !== now) continue;
        if (send.kind === "sent") {
          held.sentAt = send.sentAt;
          latest.sends.push(send.sentAt);
          continue;
        }
        delete latest.inFlight[send.identity];
        if (send.kind === "refused") {
          record(latest, { identity: send.identity, ok: false, at: send.at, reason: send.reason }, settings.failureWindow);
          latest.failed[send.identity] = { reason: send.reason, at: send.at };
        }
      }
      latest.sends = latest.sends.filter((at) => at > clock.now() - MINUTE_MS);
      this.pauseIfFailing(latest, clock.now());
    });
    if (sent.length > 0) metrics.count(EXTRA_METRIC.renewalsSent, sent.length);
    if (refused.length > 0) metrics.count(EXTRA_METRIC.renewalFailures, refused.length);
    for (const refusal of refused) logger.error(`${refusal.identity} refused reprovision: ${refusal.reason}`, { identity: refusal.identity, term });
    const paused = final.state.paused;
    metrics.gauge(EXTRA_METRIC.renewalPaused, paused ? 1 : 0);
    metrics.gauge(EXTRA_METRIC.renewalsInFlight, Object.keys(final.state.inFlight).length);
    if (paused && !state.paused) logger.error(`renewal paused itself: ${paused.reason}`, { term });
    return {
      status: paused ? "paused" : "ran",
      term,
      sent: sent.map((send) => send.identity),
      refused,
      completed,
      timedOut,
      inFlight: Object.keys(final.state.inFlight).length,
      ...(paused ? { pausedBecause: paused.reason } : {}),
    };
  }

  /** Settles the hosts in flight against what the registry says now. */
  private settle(state: RenewalState, hosts: Map<string, HostExpiry>, now: number, completed: string[], timedOut: string[]): void {
    const { timeoutMs, failureWindow } = this.deps.settings;
    for (const [identity, held] of Object.entries(state.inFlight)) {
      if (provisionedSince(hosts.get(identity), held.sentAt)) {
        delete state.inFlight[identity];
        delete state.failed[identity];
        record(state, { identity, ok: true, at: now }, failureWindow);
        completed.push(identity);
      } else if (now - held.sentAt > timeoutMs) {
        const reason = `not provisioned again within ${timeoutMs / 1000}s of its reprovision request`;
        delete state.inFlight[identity];
        state.failed[identity] = { reason, at: now };
        record(state, { identity, ok: false, at: now, reason }, failureWindow);
        timedOut.push(identity);
      }
    }
    // A failure mark ends when the host is provisioned again (fresh credentials) after it.
    for (const [identity, mark] of Object.entries(state.failed)) {
      if (provisionedSince(hosts.get(identity), mark.at)) delete state.failed[identity];
    }
  }

  private pauseIfFailing(state: RenewalState, now: number): void {
    if (state.paused) return;
    const { failureThreshold, failureWindow } = this.deps.settings;
    const failures = state.recent.filter((outcome) => !outcome.ok);
    if (failures.length <= failureThreshold) return;
    const last = failures.at(-1);
    state.paused = {
      reason: `${failures.length} of the last ${state.recent.length} renewals failed (more than ${failureThreshold} of ${failureWindow}); last: ${last?.identity}: ${last?.reason ?? "unknown"}`,
      at: now,
    };
  }

  /** The operator's requested hosts first, then the due ones, within the rate and the in-flight bound. */
  private pick(state: RenewalState, hosts: readonly HostExpiry[], term: number, now: number): HostExpiry[] {
    const { settings, logger } = this.deps;
    if (state.request && state.request.term !== term) {
      logger.warn("dropping an operator's renewal request of an earlier term", { requestTerm: state.request.term, term });
      delete state.request;
    }
    const rate = state.request?.ratePerMinute ?? settings.ratePerMinute;
    const sentLastMinute = state.sends.filter((at) => at > now - MINUTE_MS).length;
    const budget = Math.min(rate - sentLastMinute, settings.maxInFlight - Object.keys(state.inFlight).length);
    if (budget <= 0) return [];

    const byIdentity = new Map(hosts.map((host) => [host.identity, host]));
    const picked: HostExpiry[] = [];
    const request = state.request;
    if (request) {
      while (picked.length < budget && request.identities.length > 0) {
        const identity = request.identities.shift() as string;
        const host = byIdentity.get(identity);
        if (host?.state === "provisioned" && !state.inFlight[identity]) {
          // Asked for by name: a failure mark does not hold it back.
          delete state.failed[identity];
          picked.push(host);
        } else logger.warn("requested host is not provisioned or already in flight; not renewed", { identity });
      }
      if (request.identities.length === 0) delete state.request;
    }
    if (settings.enabled) {
      const taken = new Set(picked.map((host) => host.identity));
      for (const host of dueHosts(hosts, state, settings.before, now)) {
        if (picked.length >= budget) break;
        if (!taken.has(host.identity)) picked.push(host);
      }
    }
    return picked;
  }

  private async send(hosts: readonly HostExpiry[], term: number, ctx: InvocationContext): Promise<SendResult[]> {
    const { settings, clock, logger, metrics, gate, rpc } = this.deps;
    try {
      await this.deps.prepareRpc();
    } catch (error) {
      logger.error("renewal could not reach the main broker; nothing sent", { error: messageOf(error) });
      return hosts.map((host) => ({ kind: "not-sent", identity: host.identity }));
    }
    let stopped = false;
    return mapLimited(hosts, SEND_CONCURRENCY, async (host): Promise<SendResult> => {
      const identity = host.identity;
      if (stopped) return { kind: "not-sent", identity };
      let stampedAt = clock.now();
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
        return { kind: "sent", identity, sentAt: stampedAt };
      } catch (error) {
        if (error instanceof PausedError || error instanceof AttemptExceedsLeaseError) {
          // The gate closed: this run sends nothing more.
          stopped = true;
          logger.info("renewal stops: the pause gate closed", { identity, term, reason: messageOf(error) });
          return { kind: "not-sent", identity };
        }
        if (causedBy(error, RpcNotSentError)) {
          // The send-by instant passed before the request could leave: nothing reached the node.
          logger.warn("reprovision not sent before its send-by instant; the host stays due", { identity, term, reason: messageOf(error) });
          return { kind: "not-sent", identity };
        }
        const status = causedBy(error, RpcStatusError);
        return { kind: "refused", identity, at: clock.now(), reason: status ? `${status.statusmsg} (status ${status.statuscode})` : messageOf(error) };
      }
    });
  }
}

type SendResult =
  | { kind: "sent"; identity: string; sentAt: number }
  | { kind: "refused"; identity: string; at: number; reason: string }
  | { kind: "not-sent"; identity: string };

/** Keeps the last `window` outcomes. */
function record(state: RenewalState, outcome: RenewalOutcome, window: number): void {
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
