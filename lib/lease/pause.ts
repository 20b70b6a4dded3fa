/**
 * The operator's pause switch for one deployment (`choria-provisioner pause` / `resume`). A paused
 * deployment neither works nor contests the lease: its gate reads the switch before every lease
 * round and reads closed while it is on, so it stops renewing and its lease runs out; a standby then
 * takes over as after a crash. The switch is one item per deployment in the lease table, next to the
 * site's lease item, so every deployment of a site sees it wherever the table is replicated.
 */
export interface PauseState {
  site: string;
  deploymentId: string;
  paused: boolean;
  /** Who flipped the switch and why (free text from the operator). */
  by?: string;
  reason?: string;
  /** Wall-clock epoch ms of the change. */
  changedAt: number;
}

export interface PauseStore {
  read(site: string, deploymentId: string): Promise<PauseState | undefined>;
  write(state: PauseState): Promise<void>;
  /** Every deployment of `site` with a switch item (paused or resumed). */
  list(site: string): Promise<PauseState[]>;
}

export const PAUSE_KEY_PREFIX = "pause#";

/** The lease-table key of a deployment's switch; a lease item's key is the bare site name. */
export function pauseKey(site: string, deploymentId: string): string {
  return `${PAUSE_KEY_PREFIX}${encodeURIComponent(site)}#${encodeURIComponent(deploymentId)}`;
}
