/**
 * `choria-provisioner history` and `issued`: the issuance ledger's commands, their options, usage
 * and printing; the reads are lib/app/operator/issuance-operator.ts.
 */
import type { IssuanceHistory, IssuanceOperator, IssuedReport } from "../lib/app/operator/issuance-operator";
import { parseDuration } from "../lib/config/duration";
import type { Issuance } from "../lib/ports/issuance-ledger";
import { boxTable } from "./table";
import { plural } from "./text";
import { UsageError } from "./usage-error";

/** The ledger commands' own options, spread into the CLI's option table. */
export const LEDGER_OPTIONS = {
  since: { type: "string" },
  ca: { type: "string" },
} as const;

export const HISTORY_USAGE = `  history <identity>          every credential issued or renewed for the host still in the issuance ledger
                              (certificate serial and fingerprint, server JWT jti and expiry, issuer, term,
                              deployment), oldest first, the one its registry entry holds marked live
`;

export const ISSUED_USAGE = `  issued --since 30d [--ca TEXT]
                              every credential the site issued or renewed since then, oldest first; --ca:
                              only those whose certificate issuer or server JWT issuer contains TEXT
                              (case-insensitive)
`;

/** The longest --since taken: ten years, far past any retention, and ~3,650 day partitions to read. */
const LONGEST_SINCE_MS = 3_650 * 86_400_000;

export async function runHistory(operator: IssuanceOperator, args: readonly string[], print: (value: unknown, human: () => string) => void): Promise<number> {
  if (args.length !== 1 || args[0]?.trim() === "") throw new UsageError("history takes one identity");
  const history = await operator.history(args[0] as string);
  print(history, () => formatHistory(history));
  return 0;
}

export async function runIssued(
  operator: IssuanceOperator,
  values: { since?: string | boolean | string[]; ca?: string | boolean | string[] },
  print: (value: unknown, human: () => string) => void,
): Promise<number> {
  if (typeof values.since !== "string") throw new UsageError("issued needs --since, e.g. --since 30d");
  let sinceMs: number;
  try {
    sinceMs = parseDuration(values.since);
  } catch (error) {
    throw new UsageError(`--since ${values.since} is not a duration (e.g. 30d, 12h, 1y)`, { cause: error });
  }
  if (!(sinceMs > 0)) throw new UsageError("--since must be a positive duration");
  if (sinceMs > LONGEST_SINCE_MS) throw new UsageError(`--since ${values.since} is longer than 10 years; the ledger keeps records for ledger_retention`);
  const ca = typeof values.ca === "string" ? values.ca.trim() : undefined;
  if (ca === "") throw new UsageError("--ca needs the text of an issuer, e.g. --ca 'CN=Choria CA'");
  const report = await operator.issued(sinceMs, ca);
  print(report, () => formatIssued(report));
  return 0;
}

const iso = (epochMs: number) => new Date(epochMs).toISOString().replace(/\.\d{3}Z$/, "Z");

/** The credential's columns: certificate serial, server JWT jti, when the first of them expires, and who signed it. */
function credentialCells(record: Issuance): string[] {
  const expiries = [record.certificate?.notAfter, record.serverJwt?.expiresAt].filter((at): at is number => at !== undefined);
  const issuers = [record.certificate?.issuer, record.serverJwt?.issuer].filter((issuer): issuer is string => issuer !== undefined);
  return [record.certificate?.serial ?? "-", record.serverJwt?.jti ?? "-", iso(Math.min(...expiries)), issuers.join("; ")];
}

function formatHistory(history: IssuanceHistory): string {
  const { identity, site, issuances } = history;
  if (issuances.length === 0) return `no credentials of ${identity} in the issuance ledger of site "${site}"`;
  const rows = issuances.map((record) => [iso(record.issuedAt), record.kind, ...credentialCells(record), String(record.term), record.deploymentId, record.live ? "live" : ""]);
  const live = history.liveCredentialId === undefined ? "the registry holds none of them live" : issuances.some((record) => record.live) ? "" : "the registry's live credential is not in the ledger";
  const table = boxTable({
    title: `${identity}: ${plural(issuances.length, "credential")} issued`,
    headers: ["issued (UTC)", "kind", "certificate serial", "server JWT jti", "expires", "issuer", "term", "deployment", "live"],
    rows,
  });
  return live === "" ? table : `${table}\n${live}`;
}

function formatIssued(report: IssuedReport): string {
  const scope = `since ${iso(report.since)}${report.ca === undefined ? "" : ` signed by an issuer containing "${report.ca}"`}`;
  if (report.issuances.length === 0) return `no credentials issued on site "${report.site}" ${scope}`;
  const rows = report.issuances.map((record) => [iso(record.issuedAt), record.identity, record.kind, ...credentialCells(record)]);
  return boxTable({
    title: `${plural(report.issuances.length, "credential")} issued ${scope}`,
    headers: ["issued (UTC)", "identity", "kind", "certificate serial", "server JWT jti", "expires", "issuer"],
    rows,
  });
}
