import { formatDuration } from "../config/duration";
import { ConfigError } from "../errors";

/** How this deployment takes part in the election for one site (docs/behaviour.md §5). */
export interface LeaseSettings {
  /** `leader_election`; when false the gate is always open at term 0 and the store is never used. */
  leaderElection: boolean;
  /** The Choria site; one lease item per site. */
  site: string;
  /** One provisioner installation (e.g. `stage/region` or a configured id); every invocation of it shares the lease. */
  deploymentId: string;
  /** How long one acquire or keep holds the lease, measured on the writer's clock. */
  leaseDurationMs: number;
  /** `lease.renew_interval`: how often the lease keeper keeps the lease (leader) or contests it (standby). */
  keepIntervalMs: number;
  /** Largest disagreement between any two deployments' wall clocks (and between them and the nodes). */
  skewBoundMs: number;
  /**
   * How long after its envelope time a request may still start executing at a node: the request
   * TTL (nodes accept `now - ttl < time < now + ttl`). A challenger waits this much longer past
   * the expiry, so a request of the old term delayed in the network cannot run after the new
   * term's first one. 0 (the default) trusts that nothing outlives its attempt in the network.
   */
  deliveryHorizonMs?: number;
  /** Bound in real ms on one whole acquire/keep round (writes and settling read); unbounded when absent. */
  roundTimeoutMs?: number;
  /**
   * `lease.peers`: the other deployments expected to contest this site's lease (a standby's id on
   * the leader, the leader's on the standby). Any other deployment seen in the lease item is reported.
   */
  knownPeers?: readonly string[];
}

/** The timing part of the settings: the configuration's `lease.duration`, `lease.renew_interval`, `lease.skew_bound`. */
export type LeaseTiming = Pick<LeaseSettings, "leaseDurationMs" | "keepIntervalMs" | "skewBoundMs">;

export const LEASE_DEFAULTS = {
  leaseDurationMs: 30_000,
  keepIntervalMs: 10_000,
  skewBoundMs: 5_000,
} as const satisfies LeaseTiming;

export type LeaseSettingsInput = Pick<LeaseSettings, "leaderElection" | "site" | "deploymentId"> &
  Partial<Pick<LeaseSettings, "leaseDurationMs" | "keepIntervalMs" | "skewBoundMs" | "deliveryHorizonMs" | "roundTimeoutMs" | "knownPeers">>;

/**
 * Fills defaults and, with leader election on, rejects settings the election cannot work with
 * (checkLeaseTiming, and a site and deployment to name the lease and its holder).
 */
export function resolveLeaseSettings(input: LeaseSettingsInput): LeaseSettings {
  const settings: LeaseSettings = { ...LEASE_DEFAULTS, ...input };
  if (!settings.leaderElection) return settings;
  if (settings.site.trim() === "") throw new ConfigError("site", "must not be empty when leader_election is on");
  if (settings.deploymentId.trim() === "") {
    throw new ConfigError("deployment_id", "must not be empty when leader_election is on");
  }
  checkLeaseTiming(settings);
  return settings;
}

/**
 * Rejects timing under which a kept lease could not outlive the next keep: the holder only
 * counts `leaseDuration - skewBound` as valid, and that must exceed the keep interval or the
 * leader would pause between the rounds that keep it. The configuration applies it too (lib/config).
 */
export function checkLeaseTiming(timing: LeaseTiming): void {
  for (const [key, value] of [
    ["lease.duration", timing.leaseDurationMs],
    ["lease.renew_interval", timing.keepIntervalMs],
  ] as const) {
    if (!Number.isFinite(value) || value <= 0) throw new ConfigError(key, `must be a positive duration, got ${formatDuration(value)}`);
  }
  if (!Number.isFinite(timing.skewBoundMs) || timing.skewBoundMs < 0) {
    throw new ConfigError("lease.skew_bound", `must be zero or positive, got ${formatDuration(timing.skewBoundMs)}`);
  }
  const validity = timing.leaseDurationMs - timing.skewBoundMs;
  if (validity <= timing.keepIntervalMs) {
    throw new ConfigError(
      "lease.renew_interval",
      `${formatDuration(timing.keepIntervalMs)} must be shorter than lease.duration minus lease.skew_bound (${formatDuration(timing.leaseDurationMs)} - ${formatDuration(timing.skewBoundMs)} = ${formatDuration(validity)})`,
    );
  }
}
