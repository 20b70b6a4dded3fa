/**
 * SQS events as Lambda's event source mapping hands them to a function, for `sls invoke local
 * --path event.json` (scripts/sqs-event.ts): from messages received off a real (local) queue, or
 * built from host-work or lifecycle startup bodies.
 */
import { randomUUID } from "node:crypto";
import type { Message } from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import { encodeHostWork } from "../../lib/app/host-work-message";
import { TickArming } from "../../lib/app/ticks";
import { systemClock } from "../../lib/ports/clock";
import { silentLogger } from "../../lib/ports/logger";
import { buildLifecycleEvent, encodeLifecycleEvent } from "../../lib/choria/lifecycle";
import { sqsRecordFromMessage } from "./lambda-runtime";

/** The ARN of a queue from its URL (`.../<account>/<name>`), as the records' eventSourceARN. */
export function queueArnOf(queueUrl: string, region = "us-east-1"): string {
  const parts = new URL(queueUrl).pathname.split("/").filter(Boolean);
  const name = parts.at(-1) ?? "queue";
  const account = parts.length >= 2 ? parts.at(-2) : "000000000000";
  return `arn:aws:sqs:${region}:${account}:${name}`;
}

export function sqsEventFromMessages(messages: readonly Message[], queueArn: string): SQSEvent {
  return { Records: messages.map((message) => sqsRecordFromMessage(message, queueArn)) };
}

/** Records for bodies that never were on a queue (their receipt handles are made up). */
export function sqsEventFromBodies(bodies: readonly string[], queueArn: string, now = Date.now()): SQSEvent {
  return sqsEventFromMessages(
    bodies.map((body) => ({
      MessageId: randomUUID(),
      ReceiptHandle: `local-${randomUUID()}`,
      Body: body,
      Attributes: { ApproximateReceiveCount: "1", SentTimestamp: String(now) },
    })),
    queueArn,
  );
}

export function hostWorkBodies(identities: readonly string[], term: number, now = Date.now()): string[] {
  return identities.map((identity) => encodeHostWork({ identity, term, admittedAt: Math.floor(now), source: "operator" }));
}

export function startupEventBodies(identities: readonly string[], component: string, now = Date.now()): string[] {
  return identities.map((identity) =>
    new TextDecoder().decode(encodeLifecycleEvent(buildLifecycleEvent({ type: "startup", identity, component, timestampMs: now }), "choria")),
  );
}

/** A tick due now, as the keeper arms it (lib/app/ticks.ts): the body is the keeper's own, not a copy of its format. */
export async function tickBodies(now = Date.now()): Promise<string[]> {
  const bodies: string[] = [];
  const queue = {
    sendAll: async (messages: ReadonlyArray<{ body: string }>) => {
      bodies.push(...messages.map((message) => message.body));
      return messages.map(() => true);
    },
  };
  const arming = new TickArming({ queue, timing: { keepIntervalMs: 10_000, armAheadMs: 60_000 }, clock: { ...systemClock, now: () => now }, logger: silentLogger });
  // A standby's single tick at the moment the lease becomes claimable: now, so not delayed.
  await arming.arm({ holding: false, current: undefined, claimableAt: now });
  return bodies;
}
