/**
 * One site, one memory: every deployment of a site must use the site's one admission table (its
 * registry of hosts, their credentials' expiries, renewal's state), or a failover leaves the new
 * leader blind and lets the old leader's fleet expire. Package time refuses a stack that names no
 * registry, but cannot see one that names the wrong table (another stage's, or one in another
 * Region). So the lease keeper reports, every 5 minutes, the id of the registry this deployment
 * uses into the site's lease table, where all deployments meet, and says so (error log, gauge,
 * alarm) when another deployment that reported recently uses another registry.
 */
import { messageOf } from "../errors";
import { EXTRA_METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { RegistryReport, SiteRegistries } from "./use-case-ports";
export interface SiteMemoryDeps {
  deploymentId: string;
  registries: SiteRegistries;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

/** A deployment that has not reported for this long is gone (removed, or off), and no longer compared. */
const RECENT_MS = 10 * 60_000;
/**
 * A warm container reports this often (its keeper runs every minute): twice within RECENT_MS, so a
 * deployment never drops out of the comparison while it runs, at a write every 5 minutes, not every
 * minute, per deployment.
 */
const REPORT_EVERY_MS = 5 * 60_000;

export class SiteMemoryCheck {
  /** Each other registry is logged once per container; the gauge says it at every check. */
  private readonly reported = new Set<string>();
  private last: { at: number; others: string[] } | undefined;

  constructor(private readonly deps: SiteMemoryDeps) {}

  /** The deployments that use another registry than this one, as last found; none when the check itself failed (logged). */
  async check(): Promise<string[]> {
    const { clock, metrics } = this.deps;
    if (this.last && clock.now() - this.last.at < REPORT_EVERY_MS) {
      metrics.gauge(EXTRA_METRIC.registryMismatch, this.last.others.length);
      return this.last.others;
    }
    const others = await this.compare();
    if (others) this.last = { at: clock.now(), others };
    return others ?? [];
  }

  private async compare(): Promise<string[] | undefined> {
    const { deploymentId, clock, logger, metrics } = this.deps;
    let reports: RegistryReport[];
    let registryId: string;
    try {
      registryId = await this.deps.registries.ownId();
      reports = await this.deps.registries.report({ deploymentId, registryId, seenAt: clock.now() });
    } catch (error) {
      logger.warn("could not check that every deployment of the site uses the site's one registry", { error: messageOf(error) });
      return undefined;
    }
    const now = clock.now();
    const others = reports.filter((report) => report.deploymentId !== deploymentId && report.registryId !== registryId && now - report.seenAt <= RECENT_MS);
    metrics.gauge(EXTRA_METRIC.registryMismatch, others.length);
    for (const other of others.filter((report) => !this.reported.has(`${report.deploymentId}:${report.registryId}`))) {
      this.reported.add(`${other.deploymentId}:${other.registryId}`);
      logger.error(
        `deployment ${other.deploymentId} of this site uses another admission registry than this one: after a failover between the two, ` +
          "the new leader would not know the hosts the other provisioned, and renewal would let them expire. Give every deployment the " +
          "site's admission table (param admissionTable; docs/deploy.md, \"Leader and standby\") and merge the other's registry into it",
        { deploymentId, registryId, otherDeployment: other.deploymentId, otherRegistryId: other.registryId },
      );
    }
    return others.map((report) => report.deploymentId);
  }
}
