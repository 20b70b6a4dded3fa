/**
 * The operator's reads of the issuance ledger (docs/audit.md): `history <identity>`, every record
 * of one identity with the live one marked (the registry entry names the credentials the host was
 * last given), and `issued --since 30d [--ca TEXT]`, every record of the site issued since then,
 * optionally only those a matching CA or JWT issuer signed.
 */
import type { AdmissionStore } from "../../ports/admission-store";
import type { Clock } from "../../ports/clock";
import type { Issuance, IssuanceLedger } from "../../ports/issuance-ledger";

export interface IssuanceOperatorDeps {
  site: string;
  ledger: Pick<IssuanceLedger, "history" | "issuedBetween">;
  entries: Pick<AdmissionStore, "read">;
  clock: Clock;
}

/** One record of `history`, and whether it is the credential the registry says the host was last given. */
type HistoryRecord = Issuance & { live: boolean };

export interface IssuanceHistory {
  site: string;
  identity: string;
  /** The credential id the registry entry holds, when the host has one. */
  liveCredentialId?: string;
  issuances: HistoryRecord[];
}

export interface IssuedReport {
  site: string;
  /** Epoch ms. */
  since: number;
  until: number;
  ca?: string;
  issuances: Issuance[];
}

export class IssuanceOperator {
  constructor(private readonly deps: IssuanceOperatorDeps) {}

  async history(identity: string): Promise<IssuanceHistory> {
    const { site, ledger, entries } = this.deps;
    const [records, entry] = await Promise.all([ledger.history(site, identity), entries.read({ site, identity })]);
    const liveCredentialId = entry?.credentialId;
    return {
      site,
      identity,
      ...(liveCredentialId === undefined ? {} : { liveCredentialId }),
      issuances: records.map((record) => ({ ...record, live: record.credentialId === liveCredentialId })),
    };
  }

  /** Records issued in the last `sinceMs`; with `ca`, only those whose certificate or JWT issuer contains it (case-insensitive). */
  async issued(sinceMs: number, ca?: string): Promise<IssuedReport> {
    const until = this.deps.clock.now();
    const since = until - sinceMs;
    const records = await this.deps.ledger.issuedBetween(this.deps.site, since, until);
    const wanted = ca?.toLowerCase();
    const signedBy = (record: Issuance) => [record.certificate?.issuer, record.serverJwt?.issuer].some((issuer) => issuer?.toLowerCase().includes(wanted ?? ""));
    return { site: this.deps.site, since, until, ...(ca === undefined ? {} : { ca }), issuances: wanted === undefined ? records : records.filter(signedBy) };
  }
}
