/** An in-process PauseStore: the operator's switches, keyed as the lease table keys them (unit tests, the simulation). */
import { pauseKey } from "../../../lib/lease/pause";
import type { PauseState, PauseStore } from "../../../lib/ports/pause-store";

export class MemoryPauseStore implements PauseStore {
  private readonly states = new Map<string, PauseState>();

  async read(site: string, deploymentId: string): Promise<PauseState | undefined> {
    const state = this.states.get(pauseKey(site, deploymentId));
    return state && { ...state };
  }

  async write(state: PauseState): Promise<void> {
    this.states.set(pauseKey(state.site, state.deploymentId), { ...state });
  }

  async list(site: string): Promise<PauseState[]> {
    return [...this.states.values()].filter((state) => state.site === site).map((state) => ({ ...state }));
  }
}
