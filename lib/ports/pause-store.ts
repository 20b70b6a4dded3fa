/** The PauseStore port: the operator's pause switch of each deployment, stored beside the site's lease. */
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
