/** The lease and renew sections, each read with the rules that join its keys, and the form of a broker URL. */
import { RPC_PLAN } from "../engine/plan";
import { ConfigError } from "../errors";
import { checkLeaseTiming } from "../lease/settings";
import { formatDuration } from "./duration";
import { nonNegativeDuration, positiveDuration } from "./duration-settings";
import { renewControlOf } from "./renew-control";
import type { RawConfig } from "./schema";
import type { LeaseSection, RenewSection } from "./types";

/** A broker URL as `broker_urls` and `renew.broker_urls` take it: nats:// or tls://, then host and port. */
export const BROKER_URL = /^(nats|tls):\/\/[^\s/]+$/;

export function leaseSectionOf(raw: RawConfig): LeaseSection {
  const lease: LeaseSection = Object.freeze({
    durationMs: positiveDuration("lease.duration", raw.lease.duration),
    keepIntervalMs: positiveDuration("lease.renew_interval", raw.lease.renew_interval),
    skewBoundMs: nonNegativeDuration("lease.skew_bound", raw.lease.skew_bound),
    assumeSynchronizedClocks: raw.lease.assume_synchronized_clocks,
    peers: Object.freeze([...(raw.lease.peers ?? [])]),
  });
  // With no skew bound the lease is safe only if every deployment's clock agrees exactly; no real
  // fleet has that, so it takes an explicit statement that the operator accepts it.
  if (lease.skewBoundMs === 0 && !lease.assumeSynchronizedClocks) {
    throw new ConfigError(
      "lease.skew_bound",
      "0s means two deployments whose clocks differ at all can both hold the lease; set a bound above the worst clock offset, or set lease.assume_synchronized_clocks: true to accept that risk",
    );
  }
  checkLeaseTiming({ leaseDurationMs: lease.durationMs, keepIntervalMs: lease.keepIntervalMs, skewBoundMs: lease.skewBoundMs });
  // The gate opens only when the lease's remaining validity covers the next attempt, so a lease
  // shorter than the longest choria_provision attempt would keep every deployment paused.
  const longestAttemptMs = Math.max(...Object.values(RPC_PLAN).map((rpc) => rpc.timeoutMs));
  if (raw.leader_election && lease.durationMs - lease.skewBoundMs < longestAttemptMs) {
    throw new ConfigError(
      "lease.duration",
      `lease.duration minus lease.skew_bound (${leaseValidityShown(lease)}) must cover the longest RPC attempt (${formatDuration(longestAttemptMs)}), or the pause gate never opens`,
    );
  }
  return lease;
}

/** `30s - 5s = 25s`: the validity a holder counts on, with the two keys it comes from. */
function leaseValidityShown(lease: LeaseSection): string {
  return `${formatDuration(lease.durationMs)} - ${formatDuration(lease.skewBoundMs)} = ${formatDuration(lease.durationMs - lease.skewBoundMs)}`;
}

/** The helper runs under the gate like an RPC attempt: one that cannot fit a validity never runs. */
export function helperTimeoutOf(raw: RawConfig, lease: LeaseSection): number {
  const helperTimeoutMs = positiveDuration("helper_timeout", raw.helper_timeout);
  if (raw.leader_election && helperTimeoutMs > lease.durationMs - lease.skewBoundMs) {
    throw new ConfigError(
      "helper_timeout",
      `${raw.helper_timeout} must fit in one lease validity (lease.duration minus lease.skew_bound: ${leaseValidityShown(lease)}), or every host pauses at the helper step`,
    );
  }
  return helperTimeoutMs;
}

/** `lifetimeMs`: the credentials' lifetime the configuration sets (server_jwt_validity with features.ed25519), when it does. */
export function renewSection(raw: RawConfig["renew"], protocolVersion: 1 | 2, lifetimeMs?: number): RenewSection {
  const brokerUrls = (raw.broker_urls ?? []).map((url) => url.trim()).filter((url) => url !== "");
  brokerUrls.forEach((url, index) => {
    if (!BROKER_URL.test(url)) throw new ConfigError(`renew.broker_urls.${index}`, `"${url}" is not a nats:// or tls:// URL with host and port`);
  });
  if (raw.enabled && brokerUrls.length === 0) {
    throw new ConfigError("renew.broker_urls", "is required with renew.enabled: the main broker the provisioned nodes are connected to");
  }
  const timeoutMs = positiveDuration("renew.timeout", raw.timeout);
  const before = parseRenewBefore(raw.before);
  return Object.freeze({
    enabled: raw.enabled,
    before: Object.freeze(before),
    ratePerMinute: raw.rate,
    maxInFlight: raw.max_in_flight,
    failureThreshold: raw.failure_threshold,
    failureWindow: raw.failure_window,
    timeoutMs,
    brokerUrls: Object.freeze(brokerUrls),
    collective: raw.collective ?? (protocolVersion === 2 ? "choria" : "mcollective"),
    // The calendar is checked from now over a year: the same answer whenever it is loaded.
    ...renewControlOf(raw, { before, timeoutMs, lifetimeMs, now: Date.now() }),
  });
}

/** `renew.before`: a duration (`7d`), or a percentage of the credentials' lifetime (`20%`) below 100. */
export function parseRenewBefore(text: string): RenewSection["before"] {
  const percent = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(text);
  if (percent) {
    const fraction = Number(percent[1]) / 100;
    if (!(fraction > 0 && fraction < 1)) throw new ConfigError("renew.before", `${text} must be a percentage above 0 and below 100`);
    return { fraction };
  }
  return { ms: positiveDuration("renew.before", text) };
}
