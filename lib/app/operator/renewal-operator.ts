/**
 * Renewal by hand, the CLI's `renew`: the CLI reaches no broker, so a request is written into the
 * site's renewal state under the term this deployment leads with, and the leader's next `renew` run
 * (every minute) sends the hosts reprovision through the pause gate like every renewal; a request of
 * an older term is dropped there. Refused on a standby and on a paused or released deployment
 * (Operator.currentTerm), and when no leader's renew run was seen lately (renewRunsMissing):
 * nothing would carry the request out.
 */
import type { AdmissionRegistry } from "../../admission/registry";
import type { HostExpiry } from "../../admission/site-listing";
import type { Clock } from "../../ports/clock";
import { renewalReport, renewRunsMissing, requestedHosts, updateRenewalState, type RenewalReport } from "../renewal-state";
import { type RenewSelection, type RenewalStore } from "../use-case-ports";
import { OperatorRefusal } from "./report";
import type { Operator } from "./site-operator";

/** An operator's request names at most this many hosts, so it stays a small part of renewal's one state item. */
const MAX_NAMED_HOSTS = 5_000;

export interface RenewRequestOptions {
  selection: RenewSelection;
  ratePerMinute?: number;
  dryRun: boolean;
  by?: string;
}

export interface RenewRequestResult {
  term: number;
  dryRun: boolean;
  /** The hosts that will be (or, on a dry run, would be) sent reprovision, in that order. */
  hosts: Array<{ identity: string; expiresAt: number; kind: HostExpiry["credentials"]["kind"] }>;
  skipped: Array<{ identity: string; reason: string }>;
  ratePerMinute?: number;
  /** A request that was still being carried out and is replaced by this one. */
  replaced?: number;
  /** On a dry run: why the request itself would be refused, as nothing would carry it out. */
  wouldBeRefused?: string;
}

export interface RenewalOperatorDeps {
  site: string;
  operator: Pick<Operator, "currentTerm">;
  registry: Pick<AdmissionRegistry, "expiries">;
  store: RenewalStore;
  clock: Clock;
}

export class RenewalOperator {
  constructor(private readonly deps: RenewalOperatorDeps) {}

  async report(): Promise<RenewalReport> {
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), this.deps.store.read(this.deps.site)]);
    return renewalReport(hosts, stored.state, this.deps.site, this.deps.clock.now());
  }

  /**
   * Chooses the hosts now (soonest expiry first) and, unless a dry run, hands them to the leader's
   * next renew run. Refused when no leader's renew run was seen lately: nothing would send them.
   */
  async request(options: RenewRequestOptions): Promise<RenewRequestResult> {
    const { selection } = options;
    if ("identities" in selection && selection.identities.length > MAX_NAMED_HOSTS) {
      throw new OperatorRefusal(`renew names ${selection.identities.length} hosts; name at most ${MAX_NAMED_HOSTS}, or use --all or --due-within, which work for any number`);
    }
    const term = await this.deps.operator.currentTerm();
    const [hosts, stored] = await Promise.all([this.deps.registry.expiries(), this.deps.store.read(this.deps.site)]);
    const now = this.deps.clock.now();
    const missing = renewRunsMissing(stored.state, this.deps.site, now);
    if (missing && !options.dryRun) throw new OperatorRefusal(`nothing would send the hosts reprovision: ${missing}`);
    const provisioned = hosts.filter((host) => host.state === "provisioned" && host.credentials.expiresAt > now);
    const byIdentity = new Map(provisioned.map((host) => [host.identity, host]));
    const skipped: RenewRequestResult["skipped"] = [];
    let chosen: HostExpiry[];
    if ("identities" in selection) {
      chosen = [];
      for (const identity of new Set(selection.identities)) {
        const host = byIdentity.get(identity);
        if (host) chosen.push(host);
        else skipped.push({ identity, reason: "not a provisioned host with a known credential expiry that has not expired" });
      }
    } else if ("dueWithinMs" in selection) {
      chosen = provisioned.filter((host) => host.credentials.expiresAt <= now + selection.dueWithinMs);
    } else chosen = provisioned;
    chosen.sort((a, b) => a.credentials.expiresAt - b.credentials.expiresAt);
    const result: RenewRequestResult = {
      term,
      dryRun: options.dryRun,
      hosts: chosen.map((host) => ({ identity: host.identity, expiresAt: host.credentials.expiresAt, kind: host.credentials.kind })),
      skipped,
      ...(options.ratePerMinute === undefined ? {} : { ratePerMinute: options.ratePerMinute }),
      ...(missing ? { wouldBeRefused: `nothing would send the hosts reprovision: ${missing}` } : {}),
    };
    if (options.dryRun || chosen.length === 0) return result;

    const { result: replaced } = await updateRenewalState(this.deps.store, this.deps.site, (state) => {
      if (state.paused) {
        throw new OperatorRefusal(`renewal of site "${this.deps.site}" paused itself (${state.paused.reason}): see why, then run renew --resume`);
      }
      const previous = state.request && requestedHosts(hosts, state, state.request, now).remaining;
      state.request = {
        term,
        requestedAt: now,
        // What to renew, not a list of the fleet: the request fits one item whatever the fleet's size.
        selection: "identities" in selection ? { identities: chosen.map((host) => host.identity) } : selection,
        ...(options.by ? { by: options.by } : {}),
        ...(options.ratePerMinute === undefined ? {} : { ratePerMinute: options.ratePerMinute }),
      };
      return previous;
    });
    return replaced === undefined ? result : { ...result, replaced };
  }

  /** Ends a pause renewal put itself in, and forgets the failures that caused it; the next wave starts slow again. */
  async resume(): Promise<{ resumed: boolean; reason?: string }> {
    const { result } = await updateRenewalState(this.deps.store, this.deps.site, (state) => {
      const paused = state.paused;
      delete state.paused;
      delete state.wave;
      state.recent = [];
      return paused;
    });
    return result ? { resumed: true, reason: result.reason } : { resumed: false };
  }
}
