/**
 * The one admit-and-enqueue flow (docs/behaviour.md §6): a host is admitted in the registry under
 * the lease term, its term-stamped work is queued, and an admission whose work could not be queued
 * is withdrawn so the next discovery or event admits the host again: nothing is lost, only delayed.
 * Discovery, lifecycle events and the operator's reprovision all go through here.
 */
import type { AdmissionRegistry } from "../admission/registry";
import { AdmissionOutcomeUnknownError } from "../ports/admission-store";
import { identityProblem } from "../choria/identity";
import { messageOf } from "../errors";
import { systemClock, type Clock } from "../ports/clock";
import type { HostWork } from "../ports/host-work";
import type { Logger } from "../ports/logger";
import { encodeHostWork } from "./host-work-message";
import type { MessageQueue } from "./use-case-ports";

export interface AdmissionFlowDeps {
  registry: Pick<AdmissionRegistry, "admit" | "withdraw" | "forgetUnlessClaimed">;
  hostWork: MessageQueue;
  logger: Logger;
  /**
   * An admission whose outcome stayed unknown is sent again after `pauseMs`, when the caller's
   * remaining time still covers `withinMs` after the pause (the longest one admission takes to fail
   * against a stalled store); otherwise it fails at once, as without this.
   */
  resendUnknown?: { pauseMs: number; withinMs: number };
  clock?: Clock;
}

export interface AdmissionResult {
  /** Admitted and on the host-work queue. */
  queued: HostWork[];
  /** Admitted, but the queue did not take the work; the admission was withdrawn. */
  notQueued: HostWork[];
  /** The registry could not be written (logged); the host is admitted again later. */
  failed: Array<{ identity: string; error: unknown }>;
}

/** What the operator's override did with one host. */
export type ReadmitOutcome = { identity: string; queued: true } | { identity: string; queued: false; reason: string };

export class AdmissionFlow {
  constructor(private readonly deps: AdmissionFlowDeps) {}

  /**
   * Admits the hosts under `term` (a host admitted within the interval is skipped) and queues their
   * work. With `remainingMs`, an admission whose outcome stayed unknown is sent again while the time
   * allows (resendUnknown): it may have landed late, and its host would then sit admitted with no
   * work queued until the next discovery an interval later.
   */
  async admitAndEnqueue(identities: readonly string[], source: HostWork["source"], term: number, remainingMs?: () => number): Promise<AdmissionResult> {
    const failed: AdmissionResult["failed"] = [];
    const works = await Promise.all(
      identities.map(async (identity) => {
        try {
          try {
            return await this.deps.registry.admit(identity, source, term);
          } catch (error) {
            if (!(error instanceof AdmissionOutcomeUnknownError) || !this.mayResend(remainingMs)) throw error;
            const { pauseMs } = this.deps.resendUnknown as { pauseMs: number };
            this.deps.logger.info(`the outcome of the admission stayed unknown; sending it again in ${pauseMs} ms`, { identity, term, error: messageOf(error) });
            await (this.deps.clock ?? systemClock).sleep(pauseMs);
            return await error.resend();
          }
        } catch (error) {
          this.deps.logger.error("could not admit host", { identity, term, error });
          failed.push({ identity, error });
          return undefined;
        }
      }),
    );
    const admitted = works.filter((work): work is HostWork => work !== undefined);
    const notQueued = await this.enqueue(admitted);
    return { queued: admitted.filter((work) => !notQueued.includes(work)), notQueued, failed };
  }

  private mayResend(remainingMs: (() => number) | undefined): boolean {
    const resend = this.deps.resendUnknown;
    return resend !== undefined && remainingMs !== undefined && remainingMs() >= resend.pauseMs + resend.withinMs;
  }

  /**
   * The operator's override of the once-per-interval rule (never of a provisioning in progress):
   * forgets each host and admits it afresh under `term`, then queues the work. One outcome per
   * distinct identity, in the order given.
   */
  async readmit(identities: readonly string[], term: number): Promise<ReadmitOutcome[]> {
    const refused = new Map<string, string>();
    const admitted: HostWork[] = [];
    const unique = [...new Set(identities)];
    for (const identity of unique) {
      const problem = typeof identity === "string" ? identityProblem(identity) : "is not a string";
      if (problem) {
        refused.set(identity, `identity ${problem}`);
        continue;
      }
      try {
        if (!(await this.deps.registry.forgetUnlessClaimed(identity))) {
          refused.set(identity, "the host is being provisioned right now");
          continue;
        }
        const work = await this.deps.registry.admit(identity, "operator", term);
        if (work) admitted.push(work);
        else refused.set(identity, "the host was admitted again concurrently");
      } catch (error) {
        refused.set(identity, `could not admit: ${messageOf(error)}`);
      }
    }
    for (const work of await this.enqueue(admitted)) refused.set(work.identity, "the host-work queue refused the message");
    return unique.map((identity) => {
      const reason = refused.get(identity);
      return reason === undefined ? { identity, queued: true } : { identity: String(identity), queued: false, reason };
    });
  }

  /** Queues term-stamped work; returns what could not be queued, its admission withdrawn. */
  private async enqueue(works: HostWork[]): Promise<HostWork[]> {
    if (works.length === 0) return [];
    const outcomes = await this.deps.hostWork.sendEach(works.map((work) => ({ body: encodeHostWork(work) })));
    const failed: HostWork[] = [];
    for (const [index, work] of works.entries()) {
      const outcome = outcomes[index] ?? { accepted: false, reason: "the queue gave no answer for it" };
      if (outcome.accepted) continue;
      failed.push(work);
      // SQS's own reason (its error code, or the failed request with its causes): why the host is forgotten.
      this.deps.logger.error("could not queue host work; forgetting the host so it is admitted again", { identity: work.identity, term: work.term, reason: outcome.reason });
      try {
        await this.deps.registry.withdraw(work);
      } catch (error) {
        this.deps.logger.error("could not forget unqueued host; it is admitted again after the interval", {
          identity: work.identity,
          error,
        });
      }
    }
    return failed;
  }
}
