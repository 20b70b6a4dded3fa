/**
 * `choria-provisioner registry merge`: merges other admission tables' registries of the site into
 * the site's one table (docs/deploy.md, "Merging per-deployment registries"), over a port per
 * table. Per host the rule of lib/admission/merge.ts decides; the renewal state is merged here.
 *
 * The target may be live (the leader admits and provisions hosts in it while the merge runs), so
 * every write is conditional on the entry read: a write the target refuses is read again and
 * decided again, at most MAX_WRITE_ATTEMPTS times, and reported, never dropped. A dry run writes
 * nothing and reports what a run would do, each source seeing what the earlier ones would have left.
 * Merging twice changes nothing the second time: a merged entry is what the rule keeps.
 */
import { decideHostMerge, type HostMergeAction, type HostMergeReason, type StoredHost } from "../admission/merge";
import { ProvisionerError } from "../errors";
import type { Clock } from "../ports/clock";
import { mapLimited } from "./concurrency";
import type { RenewalState, RenewalStore, StoredRenewalState, RegistryTable } from "./use-case-ports";

/** The merge could not finish: the message says where it stopped; what it wrote before stays, and a new run carries on. */
export class RegistryMergeError extends ProvisionerError {}
export interface HostMergeLine {
  identity: string;
  /** The source table the entry came from. */
  from: string;
  action: HostMergeAction;
  reason: HostMergeReason;
  /** When the credentials the target holds for the host afterwards expire (epoch ms), when known. */
  expiresAt?: number;
  /** Writes the target refused because it had changed since it was read; each was followed by a read and a new decision. */
  retries: number;
  /** The target kept changing under every attempt: nothing was written for the host; a new run decides it again. */
  gaveUp?: true;
}

export interface RenewalMergeLine {
  from: string;
  /** none: the source has no renewal state; copy: the target had none; update: the target's took the source's additions. */
  action: "none" | "copy" | "keep" | "update";
  /** Hosts renewal had in flight in the source that the target's state did not have. */
  addedInFlight: string[];
  /** The source's pause was taken over (the target's state was not paused). */
  pausedFromSource: boolean;
}

export interface RegistryMergeReport {
  site: string;
  target: string;
  sources: string[];
  dryRun: boolean;
  hosts: HostMergeLine[];
  renewal: RenewalMergeLine[];
  /** Hosts by action (those given up on counted apart), and whether there was anything to write. */
  counts: Record<HostMergeAction, number> & { gaveUp: number };
  nothingToDo: boolean;
}

export interface RegistryMergeDeps<V> {
  site: string;
  target: RegistryTable<V>;
  sources: ReadonlyArray<RegistryTable<V>>;
  clock: Clock;
}

/** A host is written again after a refused write at most this many times in all; a target changing that often is being worked on. */
const MAX_WRITE_ATTEMPTS = 4;
/** Hosts merged at once: a few thousand conditional puts take seconds, not minutes, well under the table's capacity. */
const HOSTS_AT_ONCE = 8;

export class RegistryMerge<V> {
  constructor(private readonly deps: RegistryMergeDeps<V>) {}

  async run(options: { dryRun: boolean }): Promise<RegistryMergeReport> {
    const { site, target, sources } = this.deps;
    // The target is listed once; each host's entry is read again only when a write finds it changed.
    const view = new Map((await target.listHosts(site)).map((host) => [host.identity, host]));
    const renewal = new RenewalMerging(site, target.renewal, options.dryRun);
    const hosts: HostMergeLine[] = [];
    const renewalLines: RenewalMergeLine[] = [];
    for (const source of sources) {
      const entries = (await source.listHosts(site)).sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
      hosts.push(...(await mapLimited(entries, HOSTS_AT_ONCE, (host) => this.mergeHost(source.name, host, view, options.dryRun))));
      renewalLines.push(await renewal.merge(source));
    }
    const counts = { copy: 0, keep: 0, replace: 0, "fill-expiry": 0, gaveUp: 0 };
    for (const line of hosts) counts[line.gaveUp ? "gaveUp" : line.action]++;
    const writes = counts.copy + counts.replace + counts["fill-expiry"] + counts.gaveUp;
    const renewalWrites = renewalLines.filter((line) => line.action === "copy" || line.action === "update").length;
    return {
      site,
      target: target.name,
      sources: sources.map((source) => source.name),
      dryRun: options.dryRun,
      hosts,
      renewal: renewalLines,
      counts,
      nothingToDo: writes + renewalWrites === 0,
    };
  }

  /** Decides one host against the target's entry and writes what the rule says, deciding again whenever the target changed first. */
  private async mergeHost(from: string, source: StoredHost<V>, view: Map<string, StoredHost<V>>, dryRun: boolean): Promise<HostMergeLine> {
    const { site, target, clock } = this.deps;
    let current = view.get(source.identity);
    for (let attempt = 1; ; attempt++) {
      const decision = decideHostMerge(source, current, { now: clock.now(), lifetimeAttributes: target.lifetimeAttributes });
      const line = (held: StoredHost<V> | undefined): HostMergeLine => ({
        identity: source.identity,
        from,
        action: decision.action,
        reason: decision.reason,
        ...(held?.credentials ? { expiresAt: held.credentials.expiresAt } : {}),
        retries: attempt - 1,
      });
      const write = decision.write;
      if (!write) return line(current);
      const expected = current;
      if (dryRun || (await this.stopsHere(source.identity, () => target.putHost(write, expected))) === "written") {
        view.set(source.identity, write);
        return line(write);
      }
      current = await this.stopsHere(source.identity, () => target.readHost(site, source.identity));
      if (current) view.set(source.identity, current);
      else view.delete(source.identity);
      if (attempt === MAX_WRITE_ATTEMPTS) return { ...line(current), retries: attempt, gaveUp: true };
    }
  }

  /** A store failure ends the run (the next host's would too), named by the host it stopped at. */
  private async stopsHere<T>(identity: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new RegistryMergeError(
        `the merge into ${this.deps.target.name} stopped at host ${identity}: the table could not be written or read (what it wrote before stays written; run the merge again)`,
        { cause: error },
      );
    }
  }
}

/**
 * The renewal state of each source merged into the target's: copied when the target has none, else
 * the target's kept with the source's in-flight hosts it lacks and a pause of either, written with
 * the version check. A dry run carries its result to the next source instead of writing it.
 */
class RenewalMerging {
  private planned: StoredRenewalState | undefined;

  constructor(
    private readonly site: string,
    private readonly target: RenewalStore,
    private readonly dryRun: boolean,
  ) {}

  async merge(source: RegistryTable<unknown>): Promise<RenewalMergeLine> {
    const from = await source.renewal.read(this.site);
    if (from.version === 0) return { from: source.name, action: "none", addedInFlight: [], pausedFromSource: false };
    for (let attempt = 1; attempt <= MAX_WRITE_ATTEMPTS; attempt++) {
      const stored = this.planned ?? (await this.target.read(this.site));
      const merged = mergeRenewalStates(stored.version === 0 ? undefined : stored.state, from.state);
      const line = { from: source.name, action: merged.action, addedInFlight: merged.addedInFlight, pausedFromSource: merged.pausedFromSource };
      if (merged.action === "keep") return line;
      if (this.dryRun) {
        this.planned = { state: merged.state, version: stored.version + 1 };
        return line;
      }
      if (await this.target.write(this.site, merged.state, stored.version)) return line;
    }
    throw new RegistryMergeError(`the renewal state of site ${this.site} kept changing under ${MAX_WRITE_ATTEMPTS} attempts to merge ${source.name}'s into it`);
  }
}

function mergeRenewalStates(
  target: RenewalState | undefined,
  source: RenewalState,
): { state: RenewalState; action: "copy" | "keep" | "update"; addedInFlight: string[]; pausedFromSource: boolean } {
  if (target === undefined) {
    const state = structuredClone(source);
    // The source's last renew run ran over the source's table: no sign that anything runs over this one.
    delete state.lastRun;
    return { state, action: "copy", addedInFlight: [], pausedFromSource: source.paused !== undefined };
  }
  const addedInFlight = Object.keys(source.inFlight)
    .filter((identity) => target.inFlight[identity] === undefined)
    .sort();
  const pausedFromSource = target.paused === undefined && source.paused !== undefined;
  if (addedInFlight.length === 0 && !pausedFromSource) return { state: target, action: "keep", addedInFlight, pausedFromSource };
  const state = structuredClone(target);
  for (const [identity, renewal] of Object.entries(source.inFlight)) {
    if (state.inFlight[identity] === undefined) state.inFlight[identity] = structuredClone(renewal);
  }
  if (pausedFromSource) state.paused = structuredClone(source.paused);
  return { state, action: "update", addedInFlight, pausedFromSource };
}
