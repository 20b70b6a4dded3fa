/**
 * The site's lease table as the simulation observes it: every write that applied, with the true
 * time it applied at. The table is where a term begins and how long it is valid, so the
 * invariants about terms are checked on this record, not on what a deployment believed.
 */
import type { ConditionalWrite, LeaseItem, LeaseStore } from "../../../lib/ports/lease-store";
import { MemoryLeaseStore } from "../stores/memory-lease-store";
import type { VirtualTime } from "./time";

export interface AppliedLeaseWrite {
  at: number;
  kind: "claim" | "extend" | "release";
  /** The item before the write (a claim's predecessor term). */
  before: LeaseItem | undefined;
  after: LeaseItem;
}

export class ObservedLeaseTable implements LeaseStore {
  readonly writes: AppliedLeaseWrite[] = [];
  private readonly table = new MemoryLeaseStore();

  constructor(private readonly time: VirtualTime) {}

  claim: LeaseStore["claim"] = async (request) => this.observe("claim", request.site, () => this.table.applyClaim(request));
  extend: LeaseStore["extend"] = async (request) => this.observe("extend", request.site, () => this.table.applyExtend(request));
  release: LeaseStore["release"] = async (request) => this.observe("release", request.site, () => this.table.applyRelease(request));
  markAnnounced: LeaseStore["markAnnounced"] = async (request) => this.table.applyMarkAnnounced(request);
  recordPeer: LeaseStore["recordPeer"] = async (request) => this.table.applyRecordPeer(request);
  read: LeaseStore["read"] = async (site) => this.table.snapshot(site);

  /** The latest expiry (wall ms) term `term` had been given by true time `at`; undefined if it had not begun. */
  expiryOf(term: number, at: number): { holder: string; expiresAt: number } | undefined {
    let found: { holder: string; expiresAt: number } | undefined;
    for (const write of this.writes) {
      if (write.at > at) break;
      if (write.after.term === term && write.kind !== "release") found = { holder: write.after.holder, expiresAt: write.after.expiresAt };
    }
    return found;
  }

  private observe(kind: AppliedLeaseWrite["kind"], site: string, apply: () => ConditionalWrite): ConditionalWrite {
    const before = this.table.snapshot(site);
    const result = apply();
    if (result.applied) this.writes.push({ at: this.time.now, kind, before, after: { ...result.item } });
    return result;
  }
}
