import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { parseLifecycleEvent } from "../../../lib/choria/lifecycle";
import { hostWorkBodies, queueArnOf, sqsEventFromBodies, startupEventBodies } from "../../../dev/local/sqs-event";

describe("SQS event files for sls invoke local", () => {
  it("derives the queue ARN from a queue URL", () => {
    expect(queueArnOf("http://127.0.0.1:4566/000000000000/choria-provisioner-local-lifecycle")).toBe(
      "arn:aws:sqs:us-east-1:000000000000:choria-provisioner-local-lifecycle",
    );
  });

  it("wraps lifecycle startup events the lifecycle function parses", () => {
    const event = sqsEventFromBodies(startupEventBodies(["n1.example.net"], "provision_mode_server", 1_700_000_000_000), "arn:aws:sqs:us-east-1:1:q");

    const parsed = parseLifecycleEvent(new TextEncoder().encode(event.Records[0]?.body));

    expect(event.Records).toHaveLength(1);
    expect(event.Records[0]).toMatchObject({ eventSource: "aws:sqs", eventSourceARN: "arn:aws:sqs:us-east-1:1:q" });
    expect(parsed).toMatchObject({ type: "startup", identity: "n1.example.net", component: "provision_mode_server" });
  });

  it("wraps host-work messages the provision function decodes", () => {
    const event = sqsEventFromBodies(hostWorkBodies(["n1.example.net", "n2.example.net"], 4, 1_700_000_000_000), "arn:aws:sqs:us-east-1:1:q");

    expect(event.Records.map((record) => decodeHostWork(record.body))).toEqual([
      { identity: "n1.example.net", term: 4, admittedAt: 1_700_000_000_000, source: "operator" },
      { identity: "n2.example.net", term: 4, admittedAt: 1_700_000_000_000, source: "operator" },
    ]);
  });

  it("answers --help with its usage, and an unknown option with one line", async () => {
    const script = (...args: string[]) =>
      promisify(execFile)(process.execPath, ["--import", "tsx", "scripts/sqs-event.ts", ...args], { cwd: resolve(import.meta.dirname, "../../..") }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );

    const help = await script("--help");
    const unknown = await script("--bogus");

    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toContain("--from-queue URL");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^sqs-event: Unknown option '--bogus'.*\(see --help\)$/)]);
  }, 30_000);
});
