/**
 * A batch of queued messages: each is handled at most `concurrency` at a time (with a refill, the
 * workers take more from the queue as they finish), and the ones whose handling threw go back to
 * their queue (the handler decided that by throwing, e.g. with
 * RetryLaterError). What cannot be retried usefully is dead-lettered with its reason.
 */
import { messageOf, ProvisionerError } from "../errors";
import type { Logger } from "../ports/logger";
import type { BatchResult, MessageQueue, QueueMessage, BatchRefill } from "./use-case-ports";

/** A message that goes back to the queue for a later delivery (reported as a batch item failure). */
export class RetryLaterError extends ProvisionerError {}
interface Item {
  message: QueueMessage;
  taken: boolean;
}

export async function runBatch(
  messages: readonly QueueMessage[],
  concurrency: number,
  handle: (message: QueueMessage) => Promise<void>,
  logger?: Logger,
  refill?: BatchRefill,
): Promise<BatchResult> {
  if (!(concurrency >= 1)) throw new RangeError(`concurrency limit must be at least 1, got ${concurrency}`);
  const waiting: Item[] = messages.map((message) => ({ message, taken: false }));
  const failed = new Set<string>();
  let busy = 0;
  let drained = refill === undefined;
  let taking: Promise<void> | undefined;

  // One take at a time, for every worker that is free when it starts; an empty answer ends refilling.
  const takeMore = async (): Promise<void> => {
    try {
      const more = await (refill as BatchRefill).take(Math.max(1, concurrency - busy));
      if (more.length === 0) drained = true;
      waiting.push(...more.map((message) => ({ message, taken: true })));
    } catch (error) {
      drained = true;
      logger?.warn("could not take more host work from the queue; the event source delivers it", { error: messageOf(error) });
    }
  };
  const next = async (): Promise<Item | undefined> => {
    for (;;) {
      const item = waiting.shift();
      if (item) return item;
      if (drained || !refill?.open()) return undefined;
      taking ??= takeMore().finally(() => (taking = undefined));
      await taking;
    }
  };
  const runOne = async ({ message, taken }: Item): Promise<void> => {
    try {
      await handle(message);
    } catch (error) {
      logger?.debug("the message goes back to its queue", { messageId: message.id, error: messageOf(error) });
      if (!taken) failed.add(message.id);
      return;
    }
    if (taken) (refill as BatchRefill).complete(message);
  };
  const worker = async (): Promise<void> => {
    for (let item = await next(); item; item = await next()) {
      busy++;
      try {
        await runOne(item);
      } finally {
        busy--;
      }
    }
  };
  // Without a refill there is no point in more workers than messages.
  const workers = refill ? concurrency : Math.min(concurrency, messages.length);
  await Promise.all(Array.from({ length: workers }, worker));
  // At least once: what was not removed comes back after its visibility timeout, and the registry knows it is done.
  for (const { message, reason } of (await refill?.settle()) ?? []) {
    logger?.warn("could not remove finished host work from the queue", { messageId: message.id, error: reason });
  }
  return { failedMessageIds: messages.filter((message) => failed.has(message.id)).map((message) => message.id) };
}

/** Poison (and parked hosts' work) goes to the DLQ with its reason and is acknowledged, so it never spins on the queue. */
export async function deadLetter(
  dlq: MessageQueue,
  message: QueueMessage,
  reason: string,
  logger: Logger,
  extra: Record<string, string> = {},
): Promise<void> {
  logger.warn("sending a message to the dead-letter queue", { messageId: message.id, reason });
  await dlq.send({
    body: message.body,
    attributes: { reason, ...extra, sourceMessageId: message.id, sourceQueue: message.source || "unknown" },
  });
}
