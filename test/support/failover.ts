/**
 * A leader's crash on the local stack (dev/local/stack.ts) and what its successor's `status` says
 * of the site's hosts, for the renewal failover tests on the simulated fleet (test/e2e) and on real
 * go-choria servers (test/realfleet). The bounds are the lease protocol's (docs/lease.md): once the
 * leader stops renewing, a standby may claim the lease only when the stored expiry, plus the skew
 * bound and the delivery horizon (`rpc_ttl`), has passed: each of its keeper runs (one every
 * keeper rate) arms one tick at that moment, as the lease it read said it (lib/app/ticks.ts).
 */
import type { LeaseView, LocalStack } from "../../dev/local/stack";
import type { StatusFunctionReport } from "../../lib/app/operator/functions";
import type { ProvisionerConfig } from "../../lib/config/types";
import { waitUntilAsync } from "./wait";

type Deployment = LocalStack["deployments"][number];

export interface Takeover {
  killed: Deployment;
  successor: Deployment;
  /** The lease as the killed leader left it, and as its successor holds it. */
  before: LeaseView;
  after: LeaseView;
  killedAt: number;
  /** When the successor was first seen holding the lease (epoch ms, this machine's clock). */
  tookOverAt: number;
  /** The latest instant the protocol lets the takeover take: see `takeoverBy`. */
  protocolBound: number;
}

/**
 * The latest a standby holds the lease after the leader's last renewal, `lease` as that renewal
 * left it: the stored expiry, the skew bound and the delivery horizon (the lease is claimable a
 * second later), then one keeper period (the standby's last run may have read the lease before
 * that renewal, so its tick came too early and the next run arms the right one) and one renew
 * interval for the tick to be delivered and run (its delay is whole seconds, the poller's wait).
 */
function takeoverBy(lease: LeaseView, config: ProvisionerConfig, keeperRateMs: number): number {
  return lease.expiresAt + config.lease.skewBoundMs + config.rpcTtl * 1_000 + 1_000 + keeperRateMs + config.lease.keepIntervalMs;
}

/**
 * Kills the lease holder (stack.kill: its schedules, pollers and AWS requests stop) and waits until
 * another deployment holds the lease under a higher term, at the latest until `deadline` (epoch
 * ms): the caller's own bound, e.g. the first credential that would expire without a successor.
 */
export async function killLeaderAndAwaitTakeover(stack: LocalStack, deadline: number): Promise<Takeover> {
  const holding = await stack.lease();
  const killed = stack.deployments.find((deployment) => deployment.id === holding?.holder);
  if (!holding || !killed) throw new Error(`no deployment holds the lease of ${stack.site}: ${JSON.stringify(holding)}`);
  killed.kill();
  const killedAt = Date.now();
  // Read again: a renewal may have landed between the first read and the kill, none after it.
  const before = (await stack.lease()) ?? holding;
  let after: LeaseView | undefined;
  await waitUntilAsync(async () => {
    after = await stack.lease();
    const moved = after !== undefined && after.holder !== killed.id && after.term > before.term && after.expiresAt > Date.now();
    return moved ? undefined : `the lease is still ${JSON.stringify(after)} (${killed.id} was killed at term ${before.term})`;
  }, Math.max(0, deadline - Date.now()));
  const successor = stack.deployments.find((deployment) => deployment.id === after!.holder)!;
  return { killed, successor, before, after: after!, killedAt, tookOverAt: Date.now(), protocolBound: takeoverBy(before, successor.app.config, stack.timings.keeperRateMs) };
}

/**
 * Waits until the site's lifecycle consumer holds no startup event and the leader's lifecycle
 * function handled every one the fleet published: the leader has been running as it does between
 * provisionings, not killed while it had not yet read what the fleet announced. The leader's
 * ticks take the waiting events every renew_interval, armed by its keeper every keeper rate.
 */
export async function awaitLifecycleEventsHandled(stack: LocalStack, deadline: number): Promise<void> {
  await waitUntilAsync(async () => {
    const events = await stack.lifecycleEvents();
    return events.noneLost ? undefined : `lifecycle events not all handled by a leader: ${JSON.stringify(events)}`;
  }, Math.max(0, deadline - Date.now()));
}

export interface HostExpiries {
  /** Hosts whose credentials' expiry the site's registry knows. */
  known: number;
  /** Each host status lists with its expiry (epoch ms), by identity. */
  hosts: Array<{ identity: string; expiresAt: number }>;
}

/** What a deployment's status says of the site's hosts' credentials (it lists up to ten). */
export function hostExpiries(report: StatusFunctionReport): HostExpiries {
  const hosts = report.renewal.expiry.next.map(({ identity, expiresAt }) => ({ identity, expiresAt }));
  return { known: report.renewal.expiry.known, hosts: hosts.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0)) };
}

/** The same shape from what the nodes hold: identity to its credentials' expiry (epoch ms). */
export function expectedExpiries(expiries: ReadonlyMap<string, number>): HostExpiries {
  const hosts = [...expiries].map(([identity, expiresAt]) => ({ identity, expiresAt }));
  return { known: hosts.length, hosts: hosts.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0)) };
}
