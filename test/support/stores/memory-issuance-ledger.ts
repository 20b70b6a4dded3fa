import type { Issuance, IssuanceLedger } from "../../../lib/ports/issuance-ledger";

/** An in-process IssuanceLedger keyed as the DynamoDB one is, by site, identity and credential id (unit tests, the simulation). */
export class MemoryIssuanceLedger implements IssuanceLedger {
  readonly records = new Map<string, Issuance>();

  async record(issuance: Issuance): Promise<void> {
    this.records.set(`${issuance.site}\u0000${issuance.identity}\u0000${issuance.credentialId}`, structuredClone(issuance));
  }

  async history(site: string, identity: string): Promise<Issuance[]> {
    return this.sorted((record) => record.site === site && record.identity === identity);
  }

  async issuedBetween(site: string, since: number, until: number): Promise<Issuance[]> {
    return this.sorted((record) => record.site === site && record.issuedAt >= since && record.issuedAt <= until);
  }

  private sorted(keep: (record: Issuance) => boolean): Issuance[] {
    return [...this.records.values()].filter(keep).sort((a, b) => a.issuedAt - b.issuedAt);
  }
}
