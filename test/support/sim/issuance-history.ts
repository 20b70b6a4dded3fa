/**
 * The site's issuance ledger as the simulation observes it: the records it keeps, with the true
 * time each was first written (a record written again after a lost answer keeps its first time).
 * Every deployment of the site writes this one ledger, as they share the site's admission table in
 * production. Under the ledger-skipped variant it answers every write without keeping it.
 */
import type { Issuance, IssuanceLedger } from "../../../lib/ports/issuance-ledger";
import { MemoryIssuanceLedger } from "../stores/memory-issuance-ledger";
import type { VirtualTime } from "./time";

export class ObservedIssuanceLedger implements IssuanceLedger {
  private readonly ledger = new MemoryIssuanceLedger();
  private readonly writtenAt = new Map<string, number>();

  constructor(
    private readonly time: VirtualTime,
    private readonly keepsRecords = true,
  ) {}

  record: IssuanceLedger["record"] = async (issuance) => {
    if (!this.keepsRecords) return;
    await this.ledger.record(issuance);
    const key = keyOf(issuance.site, issuance.identity, issuance.credentialId);
    if (!this.writtenAt.has(key)) this.writtenAt.set(key, this.time.now);
  };

  history: IssuanceLedger["history"] = (site, identity) => this.ledger.history(site, identity);
  issuedBetween: IssuanceLedger["issuedBetween"] = (site, since, until) => this.ledger.issuedBetween(site, since, until);

  /** The record of `credentialId` for `identity` and the true time it was first written, if the ledger keeps one. */
  async find(site: string, identity: string, credentialId: string): Promise<{ record: Issuance; writtenAt: number } | undefined> {
    const record = (await this.ledger.history(site, identity)).find((candidate) => candidate.credentialId === credentialId);
    const writtenAt = this.writtenAt.get(keyOf(site, identity, credentialId));
    return record && writtenAt !== undefined ? { record, writtenAt } : undefined;
  }
}

const keyOf = (site: string, identity: string, credentialId: string) => `${site}\u0000${identity}\u0000${credentialId}`;
