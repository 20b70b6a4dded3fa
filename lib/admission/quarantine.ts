/**
 * The quarantine's record (docs/audit.md): why a host is held back and the evidence naming each
 * sender that answered as it, kept on its registry entry in a bounded JSON text. Evidence names a
 * sender by fingerprints (a sha256 prefix of its key exchange key or of a reply) and by the public
 * claims of its provisioning JWT, never by a token or a key.
 */
import type { AdmissionSummaryRow } from "../ports/admission-entry";

/** What is known of one sender: fingerprints, times and public claims, each a short text or a number. */
export type SenderEvidence = Readonly<Record<string, string | number>>;

export interface QuarantineEvidence {
  reason: string;
  senders: readonly SenderEvidence[];
}

/** A quarantined host as status and the CLI show it. */
export interface QuarantinedHost {
  identity: string;
  reason: string;
  quarantinedAt: number;
  senders: SenderEvidence[];
}

/** The evidence text's bound: a registry item stays small however much a forger sends. */
const EVIDENCE_MAX_LENGTH = 2_000;
/** Senders kept in the evidence; more are counted, not listed. */
const SENDERS_KEPT = 8;
/** A field's text is cut at this length. */
const FIELD_MAX_LENGTH = 200;
/** A quarantine stays until the operator releases it; the entry's TTL only ends one forgotten for a year. */
export const QUARANTINE_KEPT_MS = 365 * 24 * 3_600_000;
/** Quarantined hosts status lists by name; the count covers them all. */
export const QUARANTINED_SHOWN = 50;

/** The evidence as stored: at most SENDERS_KEPT senders, each field cut short, the whole within EVIDENCE_MAX_LENGTH. */
export function encodeEvidence(senders: readonly SenderEvidence[]): string {
  const bounded = senders.slice(0, SENDERS_KEPT).map((sender) =>
    Object.fromEntries(Object.entries(sender).map(([name, value]) => [name.slice(0, 40), typeof value === "string" ? value.slice(0, FIELD_MAX_LENGTH) : value])),
  );
  const more = senders.length - bounded.length;
  for (let kept = bounded.length; kept >= 0; kept--) {
    const text = JSON.stringify({ senders: bounded.slice(0, kept), ...(more + bounded.length - kept > 0 ? { more: more + bounded.length - kept } : {}) });
    if (text.length <= EVIDENCE_MAX_LENGTH) return text;
  }
  return JSON.stringify({ more: senders.length });
}

/** The senders of a stored evidence text; a text that does not parse is shown whole as one field. */
function decodeEvidence(text: string | undefined): SenderEvidence[] {
  if (text === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    const senders = (parsed as { senders?: unknown }).senders;
    const more = (parsed as { more?: unknown }).more;
    const listed = Array.isArray(senders) ? senders.filter((sender): sender is SenderEvidence => typeof sender === "object" && sender !== null) : [];
    return typeof more === "number" ? [...listed, { more }] : listed;
  } catch {
    return [{ evidence: text.slice(0, FIELD_MAX_LENGTH) }];
  }
}

/** The quarantined hosts of a site's listing, the latest first. */
export function quarantinedHosts(rows: readonly AdmissionSummaryRow[]): QuarantinedHost[] {
  return rows
    .filter((row) => row.state === "quarantined")
    .map((row) => ({ identity: row.identity, reason: row.quarantineReason ?? "", quarantinedAt: row.quarantinedAt ?? 0, senders: decodeEvidence(row.quarantineEvidence) }))
    .sort((a, b) => b.quarantinedAt - a.quarantinedAt);
}
