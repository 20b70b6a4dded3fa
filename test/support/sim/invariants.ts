/**
 * The guarantees a run is judged on, each checked where its effect lands: at the nodes (what
 * they ran, when their credentials ran out), in the site's registry and issuance ledger, and in the queues.
 */
import type { AdmissionStore } from "../../../lib/ports/admission-store";
import { CREDENTIAL_LIFETIME_MS, LEASE_TIMING, SITE } from "./deployment";
import type { NodeRecord, SimFleet } from "./fleet";
import type { ObservedIssuanceLedger } from "./issuance-history";
import type { ObservedLeaseTable } from "./lease-history";
import { SIM_EPOCH_MS } from "./time";
import type { SimQueue } from "./queue";

export const INVARIANTS = [
  "no request of an older term runs at a node after a newer term's",
  "each term's requests come from one deployment",
  "every host ends provisioned, retried within its bound, or parked with a reason",
  "no host is renewed before its renewal window opens",
  "no reachable host's credentials expire in service",
  "nothing is sent by a paused or released deployment",
  "no lifecycle event is lost",
  "every request is sent inside a valid term of its sender",
  "a term begins only once the previous term's requests can no longer run at a node",
  "every credential a node was configured with is in the site's ledger, recorded before it was sent",
] as const;

type Invariant = (typeof INVARIANTS)[number];

export interface Violation {
  invariant: Invariant;
  detail: string;
}

/** What the operator did, for the invariants that depend on it. */
export interface OperatorLog {
  /** Deployment id -> true-time intervals its pause switch was on. */
  paused: Array<{ deployment: string; from: number; until: number }>;
  /** A confirmed release of `term` by `deployment`. */
  released: Array<{ deployment: string; term: number; at: number }>;
  /** Renewals the operator asked for (they may come before a host's window). */
  renewRequested: Array<{ identity: string; at: number }>;
}

export interface Evidence {
  fleet: SimFleet;
  end: number;
  /** Waiting longer than this at the end of the run is not "retried within its bound". */
  waitBoundMs: number;
  stores: AdmissionStore[];
  hostWorkDlqs: SimQueue[];
  /** The lifecycle queues and their dead-letter queues: what reached them was not lost. */
  lifecycleQueues: SimQueue[];
  /** The startup events (their bodies) the deployments' ticks handed to admission and admission took. */
  eventsTaken: string[];
  operator: OperatorLog;
  lease: ObservedLeaseTable;
  /** The site's issuance ledger, with the true time each record was written. */
  ledger: ObservedIssuanceLedger;
  /** Per deployment: its wall-clock skew and the request TTL it sends with. */
  deployments: Map<string, { wallSkewMs: number; rpcTtlSeconds: number }>;
}

export async function checkInvariants(evidence: Evidence): Promise<Violation[]> {
  const ran = evidence.fleet.records.filter((record) => record.outcome === "ran" && record.term >= 0);
  return [
    ...fencing(ran),
    ...oneDeploymentPerTerm(evidence.fleet.records),
    ...(await everyHostSettled(evidence)),
    ...renewedInWindow(evidence),
    ...noExpiryInService(evidence),
    ...nothingSentWhileOut(evidence),
    ...noEventLost(evidence),
    ...sentInsideTerm(evidence),
    ...termsWaitForRequests(evidence),
    ...(await credentialsInLedger(evidence)),
  ];
}

function fencing(ran: NodeRecord[]): Violation[] {
  const newest = new Map<string, NodeRecord>();
  const violations: Violation[] = [];
  for (const record of ran) {
    const before = newest.get(record.identity);
    if (before && before.term > record.term) {
      violations.push({
        invariant: INVARIANTS[0],
        detail: `${record.identity} ran ${record.action} of term ${record.term} (${record.deployment}) at ${record.at} ms after ${before.action} of term ${before.term} (${before.deployment}) at ${before.at} ms`,
      });
    }
    if (!before || record.term > before.term) newest.set(record.identity, record);
  }
  return violations;
}

function oneDeploymentPerTerm(records: NodeRecord[]): Violation[] {
  const owner = new Map<number, string>();
  const violations: Violation[] = [];
  for (const record of records.filter((candidate) => candidate.term > 0)) {
    const first = owner.get(record.term);
    if (first === undefined) owner.set(record.term, record.deployment);
    else if (first !== record.deployment) violations.push({ invariant: INVARIANTS[1], detail: `term ${record.term} sent by ${first} and ${record.deployment}` });
  }
  return violations;
}

async function everyHostSettled(evidence: Evidence): Promise<Violation[]> {
  const violations: Violation[] = [];
  const parkedLetters = new Set(
    evidence.hostWorkDlqs.flatMap((queue) => queue.held()).filter((letter) => letter.attributes.reason).map((letter) => letter.attributes.identity),
  );
  for (const identity of evidence.fleet.identities) {
    if (evidence.fleet.modeOf(identity) === "main") continue;
    const waited = evidence.end - evidence.fleet.waitingSince(identity);
    if (waited <= evidence.waitBoundMs) continue;
    const entries = await Promise.all(evidence.stores.map((store) => store.read({ site: SITE, identity })));
    const parked = entries.some((entry) => entry?.state === "parked" && (entry.lastError ?? "") !== "");
    if (parked && parkedLetters.has(identity)) continue;
    const states = entries.map((entry) => entry?.state ?? "none").join("/");
    violations.push({ invariant: INVARIANTS[2], detail: `${identity} waited ${Math.round(waited / 1000)} s in provisioning mode (registry: ${states}, parked letter: ${parkedLetters.has(identity)})` });
  }
  return violations;
}

function renewedInWindow(evidence: Evidence): Violation[] {
  const violations: Violation[] = [];
  const { fleet, operator } = evidence;
  for (const record of fleet.records.filter((candidate) => candidate.outcome === "ran" && candidate.action === "choria_provision#reprovision")) {
    const period = fleet.periods.find((candidate) => candidate.identity === record.identity && candidate.from <= record.at && (candidate.until ?? Infinity) >= record.at);
    if (!period) continue;
    const opens = period.expiresAt - CREDENTIAL_LIFETIME_MS / 2;
    const requested = operator.renewRequested.some((request) => request.identity === record.identity && request.at <= record.at);
    if (record.at < opens - 1_000 && !requested) {
      violations.push({ invariant: INVARIANTS[3], detail: `${record.identity} was sent reprovision at ${record.at} ms, ${Math.round((opens - record.at) / 1000)} s before its window opened (in service since ${period.from} ms)` });
    }
  }
  return violations;
}

function noExpiryInService(evidence: Evidence): Violation[] {
  return evidence.fleet.periods
    .filter((period) => period.expiresAt < Math.min(period.until ?? Infinity, evidence.end))
    .map((period) => ({
      invariant: INVARIANTS[4],
      detail: `${period.identity}'s credentials expired at ${period.expiresAt} ms while it was in service (since ${period.from} ms)`,
    }));
}

function nothingSentWhileOut(evidence: Evidence): Violation[] {
  const violations: Violation[] = [];
  const grace = LEASE_TIMING.leaseDurationMs;
  for (const record of evidence.fleet.records) {
    const pause = evidence.operator.paused.find((p) => p.deployment === record.deployment && record.gateCheckedAt > p.from + grace && record.gateCheckedAt < p.until);
    if (pause) violations.push({ invariant: INVARIANTS[5], detail: `${record.deployment} sent ${record.action} to ${record.identity} at ${record.gateCheckedAt} ms, paused since ${pause.from} ms` });
    const release = evidence.operator.released.find((r) => r.deployment === record.deployment && record.term <= r.term && record.gateCheckedAt > r.at + grace);
    if (release) violations.push({ invariant: INVARIANTS[5], detail: `${record.deployment} sent ${record.action} of term ${record.term} at ${record.gateCheckedAt} ms, after releasing term ${release.term} at ${release.at} ms` });
  }
  return violations;
}

/** Every startup event the stream let go of was taken by admission, queued, or dead-lettered with its bytes. */
function noEventLost(evidence: Evidence): Violation[] {
  const decoder = new TextDecoder();
  const bodyOf = (message: { body: string; attributes: Record<string, string> }) =>
    message.attributes.encoding === "base64" ? Buffer.from(message.body, "base64").toString() : message.body;
  const kept = new Set([...evidence.eventsTaken, ...evidence.lifecycleQueues.flatMap((queue) => queue.taken.map(bodyOf))]);
  return evidence.fleet.stream
    .filter((event) => event.acked && !kept.has(decoder.decode(event.body)))
    .map((event) => ({ invariant: INVARIANTS[6], detail: `the startup event ${event.seq} of ${event.identity} was acknowledged but neither admitted, queued nor dead-lettered` }));
}

function sentInsideTerm(evidence: Evidence): Violation[] {
  const violations: Violation[] = [];
  for (const record of evidence.fleet.records.filter((candidate) => candidate.term > 0)) {
    const term = evidence.lease.expiryOf(record.term, record.gateCheckedAt);
    const skew = evidence.deployments.get(record.deployment)?.wallSkewMs ?? 0;
    const checkedWall = SIM_EPOCH_MS + record.gateCheckedAt + skew;
    if (term?.holder === record.deployment && checkedWall < term.expiresAt) continue;
    const why = term ? (term.holder === record.deployment ? `${checkedWall - term.expiresAt} ms after the term expired in the table` : `the table gave term ${record.term} to ${term.holder}`) : "the term had not begun in the table";
    violations.push({ invariant: INVARIANTS[7], detail: `${record.deployment} sent ${record.action} of term ${record.term} to ${record.identity} at ${record.gateCheckedAt} ms: ${why}` });
  }
  return violations;
}

function termsWaitForRequests(evidence: Evidence): Violation[] {
  const violations: Violation[] = [];
  for (const write of evidence.lease.writes.filter((candidate) => candidate.kind === "claim" && candidate.before !== undefined)) {
    const previous = write.before!;
    const holder = evidence.deployments.get(previous.holder);
    if (!holder || previous.term === write.after.term) continue;
    // The previous holder's validity ends at its expiry on its own clock; its requests live their TTL past that at the nodes.
    const lastRunnable = previous.expiresAt - SIM_EPOCH_MS - holder.wallSkewMs + holder.rpcTtlSeconds * 1_000;
    if (write.at >= lastRunnable) continue;
    violations.push({
      invariant: INVARIANTS[8],
      detail: `${write.after.holder} began term ${write.after.term} at ${write.at} ms; term ${previous.term} of ${previous.holder} could still run at a node until ${lastRunnable} ms`,
    });
  }
  return violations;
}

/** Each configure that ran at a node carried a credential the site's ledger had recorded, for that identity, before the request left. */
async function credentialsInLedger({ fleet, ledger }: Evidence): Promise<Violation[]> {
  const violations: Violation[] = [];
  for (const record of fleet.records.filter((candidate) => candidate.outcome === "ran" && candidate.action === "choria_provision#configure")) {
    const sent = `${record.deployment} configured ${record.identity} (term ${record.term}) at ${record.sentAt} ms`;
    const credentialId = fleet.credentials.get(record);
    if (credentialId === undefined) {
      violations.push({ invariant: INVARIANTS[9], detail: `${sent} with no credential the ledger could name` });
      continue;
    }
    const found = await ledger.find(SITE, record.identity, credentialId);
    if (!found) violations.push({ invariant: INVARIANTS[9], detail: `${sent} with ${credentialId}, which the site's ledger does not hold for it` });
    else if (found.writtenAt > record.sentAt) violations.push({ invariant: INVARIANTS[9], detail: `${sent} with ${credentialId}, recorded in the ledger only at ${found.writtenAt} ms` });
  }
  return violations;
}
