/**
 * The operator's pause switch for one deployment (`choria-provisioner pause` / `resume`). A paused
 * deployment neither works nor contests the lease: its gate reads the switch before every lease
 * round and reads closed while it is on, so it stops keeping its lease, which runs out; a standby then
 * takes over as after a crash. The switch is one item per deployment in the lease table, next to the
 * site's lease item, so every deployment of a site sees it wherever the table is replicated.
 */
import { LeaseStoreError } from "../errors";
import { EXTRA_METRIC } from "../ports/metric-names";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { PauseStore } from "../ports/pause-store";
export const PAUSE_KEY_PREFIX = "pause#";

/** The lease-table key of a deployment's switch; a lease item's key is the bare site name. */
export function pauseKey(site: string, deploymentId: string): string {
  return `${PAUSE_KEY_PREFIX}${encodeURIComponent(site)}#${encodeURIComponent(deploymentId)}`;
}

/**
 * The switch as this deployment's gate last read it. While it is on, no lease round runs and the
 * held term is not used: the lease runs out and a standby takes over, as after a crash.
 */
export class PauseSwitch {
  paused = false;

  constructor(
    private readonly store: PauseStore | undefined,
    private readonly who: { site: string; deploymentId: string },
    private readonly deps: { metrics: Metrics; logger: Logger },
  ) {}

  /** Reads the switch (off when there is no pause store), logging a change; throws LeaseStoreError. */
  async read(): Promise<boolean> {
    if (!this.store) return false;
    const { site, deploymentId } = this.who;
    let paused: boolean;
    try {
      paused = (await this.store.read(site, deploymentId))?.paused === true;
    } catch (error) {
      this.deps.metrics.count(EXTRA_METRIC.leaseStoreErrors);
      throw new LeaseStoreError(`could not read the pause switch of deployment ${deploymentId}`, { cause: error });
    }
    if (paused !== this.paused) {
      this.deps.logger.warn(paused ? "paused by the operator: not working, not contesting the lease" : "resumed by the operator", { site, deploymentId });
    }
    this.paused = paused;
    return paused;
  }
}
