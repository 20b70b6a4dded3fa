/**
 * A batch of queued messages: each is handled at most `concurrency` at a time, and the ones whose
 * handling threw go back to their queue (the handler decided that by throwing, e.g. with
 * RetryLaterError). What cannot be retried usefully is dead-lettered with its reason.
 */
import { messageOf, ProvisionerError } from "../errors";
import type { Logger } from "../ports";
import { Limiter } from "./concurrency";
import type { BatchResult, MessageQueue, QueueMessage } from "./ports";

/** A message that goes back to the queue for a later delivery (reported as a batch item failure). */
export class RetryLaterError extends ProvisionerError {}

export async function runBatch(
  messages: readonly QueueMessage[],
  concurrency: number,
  handle: (message: QueueMessage) => Promise<void>,
  logger?: Logger,
): Promise<BatchResult> {
  const limiter = new Limiter(concurrency);
  const failed = await Promise.all(
    messages.map((message) =>
      limiter.run(async () => {
        try {
          await handle(message);
          return undefined;
        } catch (error) {
          logger?.debug("the message goes back to its queue", { messageId: message.id, error: messageOf(error) });
          return message.id;
        }
      }),
    ),
  );
  return { failedMessageIds: failed.filter((id): id is string => id !== undefined) };
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
