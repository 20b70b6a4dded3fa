import { describe, expect, it } from "vitest";
import { RetryLaterError, runBatch } from "../../../lib/app/batch";
import type { QueueMessage } from "../../../lib/app/ports";
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
});
