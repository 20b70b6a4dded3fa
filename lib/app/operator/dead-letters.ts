/**
 * The CLI's host-work dead letters: listing them, and requeueing them, which admits each host afresh
 * under the current term. A dead letter still carries the term it was first admitted under; sent
 * back as it is (a console redrive), the provisioner would discard it as stale.
 */
import type { AdmissionRegistry } from "../../admission/registry";
import { messageOf } from "../../errors";
import type { HostWork } from "../../ports/host-work";
import type { AdmissionFlow } from "../admission-flow";
import { decodeHostWork } from "../host-work-message";
import type { MessageQueue, DeadLetterMessage, DeadLetterQueue } from "../use-case-ports";
import type { ReadmitResult, Refusal } from "./report";
export interface DeadLetterView {
  messageId: string;
  identity: string | undefined;
  term: number | undefined;
  /** Why it is there: the reason attribute, else the registry's last error (a receive-limit redrive), else unknown. */
  reason: string;
  step: string | undefined;
  failures: number | undefined;
  receiveCount: number;
  sentAt: number | undefined;
  /** Not host work at all (poison): requeue leaves it. */
  poison: boolean;
}

export interface DeadLetterListing {
  letters: DeadLetterView[];
  /** Letters received by someone else right now (another listing or a requeue): not shown, not gone. */
  inFlight: number;
}

/** A dead letter that is not host work at all (poison) names no host: it is refused by its message id. */
interface PoisonRefusal {
  identity: undefined;
  messageId: string;
  reason: string;
}

/** What `dlq requeue` did: the hosts admitted again, and those not, poison letters among them. */
export type DeadLetterRequeue = ReadmitResult<Refusal | PoisonRefusal>;

/** How long a listing or requeue keeps dead letters hidden from another operator while it works. */
const HIDE_SECONDS = 60;
const DLQ_PAGE_LIMIT = 10_000;

export interface DeadLettersDeps {
  queue: MessageQueue & DeadLetterQueue;
  registry: Pick<AdmissionRegistry, "summary">;
  admission: Pick<AdmissionFlow, "readmit">;
}

export class DeadLetters {
  constructor(private readonly deps: DeadLettersDeps) {}

  /**
   * Every dead letter this listing could receive (SQS has no peek: each receive raises the letter's
   * receive count by one, so the count is not shown as a figure of the host's failures), and how
   * many others are in flight, hidden by another listing or requeue at this moment.
   */
  async list(): Promise<DeadLetterListing> {
    const messages = await this.receiveAll();
    try {
      const [errors, depth] = await Promise.all([this.lastErrors(), this.deps.queue.counts()]);
      return { letters: messages.map((message) => view(message, errors)), inFlight: Math.max(0, depth.inFlight - messages.length) };
    } finally {
      await this.deps.queue.unhide(messages);
    }
  }

  /**
   * Admits the dead-lettered hosts (all, or those named) again under `term`, queues the fresh work
   * and removes their dead letters. Poison and hosts being provisioned stay where they are.
   */
  async requeue(term: number, selection: { identities?: readonly string[] }): Promise<DeadLetterRequeue> {
    const messages = await this.receiveAll();
    const wanted = selection.identities ? new Set(selection.identities) : undefined;
    const result: DeadLetterRequeue = { term, admitted: [], refused: [] };
    const untouched: DeadLetterMessage[] = [];
    // One admission per host, however many of its dead letters there are; the extra ones go too.
    const byIdentity = new Map<string, DeadLetterMessage[]>();
    for (const message of messages) {
      let work: HostWork;
      try {
        work = decodeHostWork(message.body);
      } catch (error) {
        untouched.push(message);
        if (!wanted) result.refused.push({ identity: undefined, messageId: message.messageId, reason: `poison, left in the DLQ: ${messageOf(error)}` });
        continue;
      }
      if (wanted && !wanted.has(work.identity)) {
        untouched.push(message);
        continue;
      }
      byIdentity.set(work.identity, [...(byIdentity.get(work.identity) ?? []), message]);
    }
    try {
      // One host at a time, its letters removed as soon as its work is queued: a requeue stopped
      // midway leaves at most one host both queued and still dead-lettered, never the whole batch.
      for (const [identity, letters] of byIdentity) {
        const [outcome] = await this.deps.admission.readmit([identity], term);
        if (!outcome?.queued) {
          untouched.push(...letters);
          result.refused.push({ identity, reason: outcome?.reason ?? "not admitted" });
          continue;
        }
        for (const letter of letters) await this.deps.queue.remove(letter);
        result.admitted.push(identity);
      }
      for (const identity of wanted ?? []) {
        if (!byIdentity.has(identity)) result.refused.push({ identity, reason: "no dead letter for this host" });
      }
    } finally {
      await this.deps.queue.unhide(untouched);
    }
    return result;
  }

  private async receiveAll(): Promise<DeadLetterMessage[]> {
    const messages: DeadLetterMessage[] = [];
    const seen = new Set<string>();
    while (messages.length < DLQ_PAGE_LIMIT) {
      const page = (await this.deps.queue.receive(10, HIDE_SECONDS)).filter((message) => !seen.has(message.messageId));
      if (page.length === 0) break;
      for (const message of page) {
        seen.add(message.messageId);
        messages.push(message);
      }
    }
    return messages;
  }

  private async lastErrors(): Promise<Map<string, string>> {
    const summary = await this.deps.registry.summary();
    return new Map(summary.lastErrors.map((entry) => [entry.identity, entry.lastError]));
  }
}

function view(message: DeadLetterMessage, errors: Map<string, string>): DeadLetterView {
  let work: HostWork | undefined;
  let problem: string | undefined;
  try {
    work = decodeHostWork(message.body);
  } catch (error) {
    problem = messageOf(error);
  }
  const identity = work?.identity ?? message.attributes.identity;
  const failures = message.attributes.failures === undefined ? undefined : Number(message.attributes.failures);
  return {
    messageId: message.messageId,
    identity,
    term: work?.term,
    reason:
      message.attributes.reason ??
      (identity && errors.get(identity) ? `retried until the receive limit; last error ${errors.get(identity)}` : undefined) ??
      problem ??
      "retried until the receive limit (no error recorded)",
    step: message.attributes.step,
    failures: Number.isFinite(failures) ? failures : undefined,
    receiveCount: message.receiveCount,
    sentAt: message.sentAt,
    poison: work === undefined,
  };
}

