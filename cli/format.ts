/**
 * What the CLI prints for people: status, the election, dead letters, and what `reprovision`,
 * `dlq requeue` and `pause` did. Tables are boxed as the Choria CLI boxes them (./table.ts); a
 * command that acts on hosts says what it did per host and ends, as `choria req` does, with
 * "Finished processing N hosts".
 */
import type { DeadLetterRequeue, DeadLetterView } from "../lib/app/operator/dead-letters";
import type { QuarantinedHost } from "../lib/admission/quarantine";
import type { DeploymentStatus, ReadmitResult } from "../lib/app/operator/report";
import type { ElectionView, PauseResult } from "../lib/app/operator/site-operator";
import { formatRenewalReport } from "./renew";
import { boxTable } from "./table";
import { ago, plural } from "./text";

function leaseLine(lease: DeploymentStatus["lease"]): string {
  if (lease.leader === null) return lease.term === null ? "nobody has held the lease yet" : `released (last term ${lease.term})`;
  const expiry =
    (lease.expiresInMs ?? 0) > 0 ? `expires in ${((lease.expiresInMs ?? 0) / 1000).toFixed(1)}s` : `expired ${(-(lease.expiresInMs ?? 0) / 1000).toFixed(1)}s ago`;
  return `${lease.leader} holds term ${lease.term}, ${expiry}`;
}

/** The deployment's role as a heading: a candidate is named as one, never as a standby of nobody. */
function roleHeading(status: DeploymentStatus): string {
  if (status.paused) return "PAUSED";
  return status.role === "candidate" ? "CANDIDATE (no deployment leads the site now)" : status.role.toUpperCase();
}

const QUEUE_NAMES = { hostWork: "host work", hostWorkDlq: "host-work DLQ", lifecycle: "lifecycle", lifecycleDlq: "lifecycle DLQ" } as const;

function queuesTable(queues: DeploymentStatus["queues"]): string {
  return boxTable({
    headers: ["queue", "visible", "in flight", "delayed"],
    rows: Object.entries(QUEUE_NAMES).map(([key, label]) => {
      const counts = queues[key as keyof typeof QUEUE_NAMES];
      return "error" in counts ? [label, `error: ${counts.error}`, "", ""] : [label, String(counts.visible), String(counts.inFlight), String(counts.delayed)];
    }),
  });
}

function lastErrorsTable(lastErrors: DeploymentStatus["registry"]["lastErrors"], now: number): string {
  return boxTable({
    title: "last errors",
    headers: ["host", "state", "step", "failures", "when", "error"],
    rows: lastErrors.map((entry) => [
      entry.identity,
      entry.state,
      entry.failedStep ?? "-",
      entry.failures === undefined ? "-" : String(entry.failures),
      ago(now, entry.lastErrorAt),
      entry.lastError,
    ]),
  });
}

const DAY_MS = 86_400_000;

/** The provisioning JWTs the hosts presented, per issuer: what expires within the window, what has expired, and when the next one goes. */
function provisioningJwtLines(forecast: DeploymentStatus["registry"]["provisioningJwts"], now: number): string[] {
  if (forecast.issuers.length === 0) return [];
  const days = (ms: number) => `${(ms / DAY_MS).toFixed(ms < DAY_MS ? 1 : 0)}d`;
  const heading = `provisioning JWTs the hosts presented: ${forecast.expiring} expiring within ${days(forecast.windowMs)}, ${forecast.expired} expired`;
  const advice = forecast.expiring + forecast.expired > 0 ? ["nodes from images with these JWTs stop enrolling when they expire: bake the images again with a fresh provisioning JWT (docs/audit.md)"] : [];
  const table = boxTable({
    headers: ["issuer", "hosts", "expiring", "expired", "next expiry"],
    rows: forecast.issuers.map((entry) => [
      entry.issuer === "" ? "(none)" : entry.issuer,
      String(entry.hosts),
      String(entry.expiring),
      String(entry.expired),
      entry.nextExpiresAt === undefined ? "-" : `${new Date(entry.nextExpiresAt).toISOString()} (in ${days(entry.nextExpiresAt - now)})`,
    ]),
  });
  return ["", heading, ...advice, table];
}

export function formatStatus(status: DeploymentStatus, now: number): string {
  const lines = [`site "${status.site}", deployment ${status.deploymentId}: ${roleHeading(status)}`, `lease: ${leaseLine(status.lease)}`];
  if (status.pause?.paused) {
    lines.push(`paused ${ago(now, status.pause.changedAt)}${status.pause.by ? ` by ${status.pause.by}` : ""}${status.pause.reason ? `: ${status.pause.reason}` : ""}`);
  }
  lines.push("", queuesTable(status.queues));
  const { byState } = status.registry;
  lines.push(
    "",
    `registry: ${status.registry.total} hosts (${[
      ...Object.entries(byState).map(([state, count]) => `${state} ${count}`),
      // Past their expiry: no work is waiting for them, the table's TTL has not deleted them yet.
      ...(status.registry.expired > 0 ? [`expired ${status.registry.expired}`] : []),
    ].join(", ")})`,
  );
  lines.push(...provisioningJwtLines(status.registry.provisioningJwts, now));
  if (status.renewal) lines.push("", formatRenewalReport(status.renewal, now));
  if (status.registry.lastErrors.length > 0) lines.push("", lastErrorsTable(status.registry.lastErrors, now));
  if (status.registry.byState.quarantined > 0) lines.push("", formatQuarantine(status.registry.quarantined, now, status.registry.byState.quarantined));
  return lines.join("\n");
}

/** The quarantined hosts, one row per sender of each (`quarantine list`, and status when there are any). */
export function formatQuarantine(hosts: readonly QuarantinedHost[], now: number, total = hosts.length): string {
  if (hosts.length === 0) return "no host is quarantined";
  const senderText = (sender: QuarantinedHost["senders"][number]) =>
    Object.entries(sender)
      .map(([name, value]) => `${name} ${value}`)
      .join(", ");
  return [
    boxTable({
      title: "quarantined",
      headers: ["host", "when", "reason", "sender"],
      rows: hosts.flatMap((host) => {
        const senders = host.senders.length > 0 ? host.senders.map(senderText) : ["-"];
        return senders.map((sender, index) => (index === 0 ? [host.identity, ago(now, host.quarantinedAt), host.reason, sender] : ["", "", "", sender]));
      }),
    }),
    "",
    `${plural(total, "quarantined host")}: release each once resolved with choria-provisioner quarantine release <identity>`,
  ].join("\n");
}

export function formatElection(view: ElectionView): string {
  return [
    `site "${view.site}": ${leaseLine(view.lease)}`,
    boxTable({
      headers: ["deployment", "role", "paused"],
      rows: view.deployments.map((deployment) => [
        deployment.deploymentId,
        deployment.role,
        deployment.paused ? `yes${deployment.pause?.by ? ` (by ${deployment.pause.by})` : ""}` : "no",
      ]),
    }),
  ].join("\n");
}

export function formatDeadLetters(letters: readonly DeadLetterView[], now: number, inFlight = 0): string {
  const busy = inFlight > 0 ? `${inFlight} more in flight (another listing or requeue holds them, for up to a minute): list again to see them` : "";
  if (letters.length === 0) return busy ? `no dead letter could be read; ${busy}` : "the host-work DLQ is empty";
  return [
    boxTable({
      // "receives" counts every receive, a listing's own included (SQS has no peek): not the host's failures.
      headers: ["host", "term", "step", "failures", "receives", "sent", "reason"],
      rows: letters.map((letter) => [
        letter.identity ?? (letter.poison ? "(poison)" : "-"),
        letter.term === undefined ? "-" : String(letter.term),
        letter.step ?? "-",
        letter.failures === undefined ? "-" : String(letter.failures),
        String(letter.receiveCount),
        ago(now, letter.sentAt),
        letter.reason,
      ]),
    }),
    "",
    `${plural(letters.length, "dead letter")}${busy ? `; ${busy}` : ""}`,
  ].join("\n");
}

/** `dlq requeue --json` as scripts read it: the result under the names the command has always printed. */
export interface RequeueJson {
  term: DeadLetterRequeue["term"];
  requeued: DeadLetterRequeue["admitted"];
  skipped: DeadLetterRequeue["refused"];
}

export function requeueJson(result: DeadLetterRequeue): RequeueJson {
  return { term: result.term, requeued: result.admitted, skipped: result.refused };
}

/** `dlq requeue`: what was done per host, then "Finished processing N dead-lettered hosts". */
export function formatRequeue(result: DeadLetterRequeue): string {
  const lines = [
    ...result.admitted.map((identity) => `${identity}: requeued under term ${result.term}`),
    ...result.refused.map((refusal) => `${"messageId" in refusal ? `(message ${refusal.messageId})` : refusal.identity}: not requeued: ${refusal.reason}`),
  ];
  const total = result.admitted.length + result.refused.length;
  lines.push("", `Finished processing ${plural(total, "dead-lettered host")}: ${result.admitted.length} requeued, ${result.refused.length} not`);
  return lines.join("\n");
}

/** `reprovision`: what was done per host, then "Finished processing N hosts". */
export function formatReprovision(result: ReadmitResult): string {
  const lines = [
    ...result.admitted.map((identity) => `${identity}: admitted for provisioning under term ${result.term}`),
    ...result.refused.map((refusal) => `${refusal.identity}: not admitted: ${refusal.reason}`),
  ];
  const total = result.admitted.length + result.refused.length;
  lines.push("", `Finished processing ${plural(total, "host")}: ${result.admitted.length} admitted for provisioning, ${result.refused.length} not`);
  if (result.admitted.length > 0) {
    lines.push("Admitted hosts are provisioned once they answer in provisioning mode; this does not put a configured node back into it.");
  }
  return lines.join("\n");
}

const utc = (epochMs: number) => `${new Date(epochMs).toISOString().slice(11, 19)} UTC`;

export function formatPause(state: PauseResult, now: number): string {
  const head = `paused deployment ${state.deploymentId} of site "${state.site}": it stops working at its next lease round and no longer contests the lease`;
  if (state.takeoverAt === null) return `${head}; it does not hold the lease, so nothing fails over.`;
  return (
    `${head}.\nIt holds the lease: a standby can take over from ${utc(state.takeoverAt)} (in ${Math.max(0, Math.round((state.takeoverAt - now) / 1000))} s): ` +
    "the lease's expiry plus skew_bound plus rpc_ttl, the longest an old request may still reach a node."
  );
}
