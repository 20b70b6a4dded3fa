import { emptyRenewalState } from "../../../lib/app/renewal-state";
import { type RenewalState, type RenewalStore, type StoredRenewalState } from "../../../lib/app/use-case-ports";

/** An in-process RenewalStore with the same version check (unit tests, the simulation). */
export class MemoryRenewalStore implements RenewalStore {
  private readonly sites = new Map<string, StoredRenewalState>();

  async read(site: string): Promise<StoredRenewalState> {
    const stored = this.sites.get(site);
    return stored ? structuredClone(stored) : { state: emptyRenewalState(), version: 0 };
  }

  async write(site: string, state: RenewalState, version: number): Promise<boolean> {
    if ((this.sites.get(site)?.version ?? 0) !== version) return false;
    this.sites.set(site, { state: structuredClone(state), version: version + 1 });
    return true;
  }
}
