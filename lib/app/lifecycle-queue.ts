/**
 * What the lifecycle function does with one batch of its queue (docs/lifecycle.md): the queued
 * startup events are admitted, the ticks keep the lease and take the events waiting on the broker
 * (ticks.ts), and a discovery continuation runs the next discovery (discovery-continuation.ts).
 */
import { messageOf } from "../errors";
import type { Logger } from "../ports/logger";
import { parseContinuation, type DiscoveryContinuation } from "./discovery-continuation";
import type { Leadership } from "./leadership";
import type { LifecycleEvents } from "./lifecycle-events";
import { parseTick, type Tick, type Ticks } from "./ticks";
import type { BatchResult, InvocationContext, QueueMessage } from "./use-case-ports";

export interface LifecycleQueueDeps {
  events: Pick<LifecycleEvents, "handle">;
  ticks: Pick<Ticks, "run">;
  leadership: Pick<Leadership, "continueDiscovery">;
  logger: Logger;
}

export class LifecycleQueue {
  constructor(private readonly deps: LifecycleQueueDeps) {}

  async handle(messages: readonly QueueMessage[], ctx: InvocationContext): Promise<BatchResult> {
    const { ticks, continuations, queued } = sortBatch(messages);
    // The queued events first: a tick and a continuation may each take the rest of the invocation's slot.
    const result = await this.deps.events.handle(queued);
    // Side by side: a continuation's discovery must not hold back the lease round a tick brings.
    await Promise.all([ticks.length > 0 ? this.deps.ticks.run(ticks, ctx) : undefined, this.continueDiscoveries(continuations, ctx)]);
    return result;
  }

  /**
   * One discovery per continued term (SQS may deliver a message twice); only the term this
   * deployment holds runs, the others are dropped by the gate check. Never throws: a continuation
   * that failed is not sent back, the next scheduled discovery finds the hosts.
   */
  private async continueDiscoveries(continuations: readonly DiscoveryContinuation[], ctx: InvocationContext): Promise<void> {
    const latest = new Map<number, DiscoveryContinuation>();
    for (const continuation of continuations) {
      const seen = latest.get(continuation.term);
      if (!seen || continuation.until > seen.until) latest.set(continuation.term, continuation);
    }
    for (const continuation of latest.values()) {
      try {
        await this.deps.leadership.continueDiscovery(continuation, ctx);
      } catch (error) {
        this.deps.logger.error("a discovery continuation failed; the next scheduled discovery finds the hosts", { term: continuation.term, error: messageOf(error) });
      }
    }
  }
}

/** A batch's ticks and continuations apart from its queued startup events. */
function sortBatch(messages: readonly QueueMessage[]): { ticks: Tick[]; continuations: DiscoveryContinuation[]; queued: QueueMessage[] } {
  const ticks: Tick[] = [];
  const continuations: DiscoveryContinuation[] = [];
  const queued: QueueMessage[] = [];
  for (const message of messages) {
    const tick = parseTick(message.body);
    const continuation = tick ? undefined : parseContinuation(message.body);
    if (tick) ticks.push(tick);
    else if (continuation) continuations.push(continuation);
    else queued.push(message);
  }
  return { ticks, continuations, queued };
}
