/**
 * The SQS adapter's sending rules, against a scripted client (the real fauxqs behaviour is covered
 * by test/integration/app/lifecycle-bridge-standby.test.ts): what SQS can never take is refused
 * without a request, batches stay within ten entries and 1 MiB, and an entry refused as the
 * sender's fault is not retried.
 */
import type { SQSClient, SendMessageBatchCommand } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { SqsMessageQueue } from "../../../lib/aws/sqs-queue";
import type { Clock } from "../../../lib/ports/clock";

type Entry = { Id: string; MessageBody: string };
type Reply = { Successful?: Array<{ Id: string }>; Failed?: Array<{ Id: string; Code: string; Message: string; SenderFault: boolean }> };

const clock: Clock = { now: () => 0, monotonic: () => 0, sleep: async () => undefined };
/** SQS takes a message (and a batch) of at most 1 MiB. */
const SQS_MAX_BYTES = 1_048_576;

function scriptedClient(answer: (entries: Entry[], call: number) => Reply) {
  const batches: Entry[][] = [];
  const client = {
    send: async (command: SendMessageBatchCommand) => {
      const entries = (command.input.Entries ?? []) as Entry[];
      batches.push(entries);
      return answer(entries, batches.length);
    },
  } as unknown as SQSClient;
  return { client, batches };
}
const acceptAll = (entries: Entry[]): Reply => ({ Successful: entries.map((entry) => ({ Id: entry.Id })) });

describe("SqsMessageQueue.sendEach", () => {
  it("refuses bodies SQS never accepts without sending them, and sends the rest", async () => {
    const { client, batches } = scriptedClient(acceptAll);
    const queue = new SqsMessageQueue({ client, url: "http://sqs/q", clock });

    const outcomes = await queue.sendEach([{ body: "good" }, { body: "bad\u0001" }, { body: "x".repeat(SQS_MAX_BYTES + 1) }, { body: "lone \uD800" }, { body: "also good" }]);

    expect(outcomes.map((outcome) => outcome.accepted)).toEqual([true, false, false, false, true]);
    expect(outcomes[1]).toMatchObject({ permanent: true, reason: expect.stringMatching(/InvalidMessageContents: U\+0001 at offset 3/) });
    expect(outcomes[2]).toMatchObject({ permanent: true, reason: expect.stringMatching(/MessageTooLong/) });
    expect(outcomes[3]).toMatchObject({ permanent: true });
    expect(batches.flat().map((entry) => entry.MessageBody)).toEqual(["good", "also good"]);
  });

  it("splits batches at 1 MiB as well as at ten entries", async () => {
    const { client, batches } = scriptedClient(acceptAll);
    const queue = new SqsMessageQueue({ client, url: "http://sqs/q", clock });
    const big = "y".repeat(600_000);

    const outcomes = await queue.sendEach([{ body: big }, { body: big }, ...Array.from({ length: 12 }, (_, index) => ({ body: `small-${index}` }))]);

    expect(outcomes.every((outcome) => outcome.accepted)).toBe(true);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(10);
      expect(batch.reduce((sum, entry) => sum + entry.MessageBody.length, 0)).toBeLessThanOrEqual(SQS_MAX_BYTES);
    }
  });

  it("does not retry an entry refused as the sender's fault; retries the others and reports their last reason", async () => {
    const { client, batches } = scriptedClient((entries) => ({
      Successful: entries.filter((entry) => entry.MessageBody === "ok").map((entry) => ({ Id: entry.Id })),
      Failed: entries
        .filter((entry) => entry.MessageBody !== "ok")
        .map((entry) =>
          entry.MessageBody === "sender"
            ? { Id: entry.Id, Code: "InvalidParameterValue", Message: "no", SenderFault: true }
            : { Id: entry.Id, Code: "InternalError", Message: "try again", SenderFault: false },
        ),
    }));
    const queue = new SqsMessageQueue({ client, url: "http://sqs/q", clock, attempts: 3 });

    const outcomes = await queue.sendEach([{ body: "ok" }, { body: "sender" }, { body: "flaky" }]);

    expect(outcomes).toEqual([
      { accepted: true },
      { accepted: false, permanent: true, reason: "InvalidParameterValue: no" },
      { accepted: false, permanent: false, reason: "InternalError: try again" },
    ]);
    expect(batches.map((batch) => batch.map((entry) => entry.MessageBody))).toEqual([["ok", "sender", "flaky"], ["flaky"], ["flaky"]]);
  });

  it("sends what SQS accepts: tab, newline, CR, astral characters; refuses an invalid character in an attribute", async () => {
    const { client, batches } = scriptedClient(acceptAll);
    const queue = new SqsMessageQueue({ client, url: "http://sqs/q", clock });
    const accepted = "a\tb\nc\rd \u{1F600} \uE000";

    const outcomes = await queue.sendEach([{ body: accepted }, { body: "ok", attributes: { reason: "bad\u0007" } }]);

    expect(outcomes[0]).toEqual({ accepted: true });
    expect(outcomes[1]).toMatchObject({ accepted: false, permanent: true, reason: expect.stringMatching(/U\+0007/) });
    expect(batches.flat().map((entry) => entry.MessageBody)).toEqual([accepted]);
  });
});
