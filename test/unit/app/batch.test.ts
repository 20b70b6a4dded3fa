import { describe, expect, it } from "vitest";
import { RetryLaterError, runBatch } from "../../../lib/app/batch";
import { type BatchRefill } from "../../../lib/app/use-case-ports";
import type { QueueMessage } from "../../../lib/app/use-case-ports";
import { InMemoryQueue, RecordingLogger, failedIds } from "../../support/fakes";

describe("a batch of queued messages", () => {
  it("returns the ids of the messages whose handling threw, and handles every other one", async () => {
    // Arrange
    const queue = new InMemoryQueue();
    const messages = ["ok-1", "retry", "ok-2", "broken"].map((body) => queue.delivery(body));
    const handled: string[] = [];
    const handle = async (message: QueueMessage) => {
      if (message.body === "retry") throw new RetryLaterError("later");
      if (message.body === "broken") throw new TypeError("bug");
      handled.push(message.body);
    };

    // Act
    const result = await runBatch(messages, 2, handle, new RecordingLogger());

    // Assert
    expect(failedIds(result)).toEqual([messages[1]!.id, messages[3]!.id].sort());
    expect(handled.sort()).toEqual(["ok-1", "ok-2"]);
  });

  it("handles at most `concurrency` messages at once", async () => {
    // Arrange
    const queue = new InMemoryQueue();
    const messages = Array.from({ length: 9 }, (_, index) => queue.delivery(`m${index}`));
    let running = 0;
    let most = 0;

    // Act
    const result = await runBatch(messages, 3, async () => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => setImmediate(resolve));
      running--;
    });

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(most).toBe(3);
  });

  it("an empty batch has nothing to retry", async () => {
    // Act
    const result = await runBatch([], 4, async () => undefined);

    // Assert
    expect(result).toEqual({ failedMessageIds: [] });
  });

  describe("with a refill from the queue", () => {
    /** The queue behind the batch: `take` hands out what is left, `settle` removes what `complete` marked. */
    function queueRefill(bodies: string[], options: { open?: () => boolean; failTake?: boolean; failRemoval?: string } = {}) {
      const queue = new InMemoryQueue();
      const left = bodies.map((body) => queue.delivery(body));
      const completed: string[] = [];
      const marked: QueueMessage[] = [];
      let emptied: () => void = () => undefined;
      const empty = new Promise<void>((resolve) => (emptied = resolve));
      const refill: BatchRefill = {
        take: async (max) => {
          if (options.failTake) throw new Error("ReceiveMessage: connect ETIMEDOUT");
          const taken = left.splice(0, max);
          if (taken.length === 0) emptied();
          return taken;
        },
        complete: (message) => void marked.push(message),
        settle: async () => {
          const removed = marked.splice(0);
          if (options.failRemoval) return removed.map((message) => ({ message, reason: options.failRemoval as string }));
          completed.push(...removed.map((message) => message.body));
          return [];
        },
        open: options.open ?? (() => true),
      };
      return { queue, refill, completed, empty, left };
    }

    it("keeps the other workers busy with more work while one slow message holds the batch; only the batch's failures are reported", async () => {
      // Arrange
      const { queue, refill, completed, empty } = queueRefill(["q1", "q2", "q3-fails", "q4", "q5", "q6"]);
      const batch = ["slow", "b1", "b2-fails"].map((body) => queue.delivery(body));
      const handled: string[] = [];
      let running = 0;
      let most = 0;
      const handle = async (message: QueueMessage) => {
        running++;
        most = Math.max(most, running);
        try {
          // The slow host finishes once the queue is empty (or, without a refill, after a while).
          if (message.body === "slow") await Promise.race([empty, new Promise((resolve) => setTimeout(resolve, 200))]);
          else await new Promise<void>((resolve) => setImmediate(resolve));
          if (message.body.endsWith("-fails")) throw new RetryLaterError(`${message.body} later`);
          handled.push(message.body);
        } finally {
          running--;
        }
      };

      // Act
      const result = await runBatch(batch, 3, handle, new RecordingLogger(), refill);

      // Assert: the queue was emptied while the slow one held the batch; the failed taken one stays in the queue.
      expect(handled.sort()).toEqual(["b1", "q1", "q2", "q4", "q5", "q6", "slow"]);
      expect(completed.sort()).toEqual(["q1", "q2", "q4", "q5", "q6"]);
      expect(result.failedMessageIds).toEqual([batch[2]!.id]);
      expect(most).toBe(3);
    });

    it("takes nothing once the refill is closed (too little of the invocation left)", async () => {
      // Arrange
      const { queue, refill, left } = queueRefill(["q1", "q2"], { open: () => false });
      const batch = [queue.delivery("b1")];

      // Act
      const result = await runBatch(batch, 4, async () => undefined, undefined, refill);

      // Assert
      expect(result.failedMessageIds).toEqual([]);
      expect(left.map((message) => message.body)).toEqual(["q1", "q2"]);
    });

    it("removals the queue refused are logged with the message and the reason, and the batch still finishes", async () => {
      // Arrange
      const { queue, refill } = queueRefill(["q1", "q2"], { failRemoval: "ReceiptHandleIsInvalid: expired" });
      const logger = new RecordingLogger();

      // Act
      const result = await runBatch([queue.delivery("b1")], 2, async () => undefined, logger, refill);

      // Assert
      expect(result.failedMessageIds).toEqual([]);
      const warnings = logger.at("warn").filter((line) => line.message === "could not remove finished host work from the queue");
      expect(warnings).toHaveLength(2);
      expect(warnings.every((line) => line.attributes?.error === "ReceiptHandleIsInvalid: expired")).toBe(true);
    });

    it("a take that fails ends refilling and the batch still finishes", async () => {
      // Arrange
      const { queue, refill } = queueRefill(["q1"], { failTake: true });
      const batch = [queue.delivery("b1"), queue.delivery("b2")];
      const logger = new RecordingLogger();
      const handled: string[] = [];

      // Act
      const result = await runBatch(batch, 4, async (message) => void handled.push(message.body), logger, refill);

      // Assert
      expect(result.failedMessageIds).toEqual([]);
      expect(handled.sort()).toEqual(["b1", "b2"]);
      expect(logger.at("warn").map((line) => line.message)).toContain("could not take more host work from the queue; the event source delivers it");
    });
  });
});
