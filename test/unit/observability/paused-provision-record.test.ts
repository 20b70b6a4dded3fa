/**
 * The ERROR line issue 32 reported: "Could not provision node775...: paused: the lease store for
 * site local could not be reached", with nothing under it to tell a wrong ARN from a slow store.
 * Here the real pause gate over a lease store that denies access or never answers, the real engine
 * and the real loggers: the line names the store's failure in its text and in its `error` field.
 */
import { describe, expect, it } from "vitest";
import { createLogger } from "../../../lib/aws/powertools-logger";
import { ProvisionEngine } from "../../../lib/engine/provision";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import type { Logger } from "../../../lib/ports/logger";
import { engineSettings } from "../../support/engine-settings";
import { captureOutputOf } from "../../support/capture";
import { FakeHelper, FakeRpc, RecordingMetrics, VirtualClock } from "../../support/fakes";
import { helperResponseWith } from "../../support/helper-response";

const IDENTITY = "node775.local.example.net";
const TOKEN = "s3cret-provisioning-token-value";

/** Every call fails with `failure` (or, without one, never answers). */
function failingStore(failure?: () => Error): LeaseStore {
  const call = () => (failure ? Promise.reject(failure()) : new Promise<never>(() => {}));
  return { claim: call, extend: call, release: call, markAnnounced: call, recordPeer: call, read: call };
}

function denied(): Error {
  const error = new Error(`User: arn:aws:sts::123456789012:assumed-role/provisioner is not authorized to perform: dynamodb:UpdateItem on resource: arn:aws:dynamodb:eu-west-1:123456789012:table/wrong`);
  error.name = "AccessDeniedException";
  return error;
}

/** Provisions one host through the pause gate over `store`, logging to `logger`. */
async function provisionOver(store: LeaseStore, logger: Logger): Promise<void> {
  const clock = new VirtualClock();
  const metrics = new RecordingMetrics();
  // A bounded round, as the functions run it: a store that never answers fails the round.
  const settings = resolveLeaseSettings({ leaderElection: true, site: "local", deploymentId: "local", roundTimeoutMs: 20 });
  const gate = createLeaseGate(settings, { store, metrics, clock, logger });
  const engine = new ProvisionEngine({
    settings: engineSettings(TOKEN),
    rpc: new FakeRpc(),
    gate,
    helper: new FakeHelper(helperResponseWith({ configuration: { identity: IDENTITY } })),
    metrics,
    clock,
    logger,
  });
  await engine.provision({ identity: IDENTITY, term: 1, admittedAt: clock.now(), source: "discovery" });
}

const LOGGERS: Array<[string, (run: (logger: Logger) => Promise<void>) => Promise<string[]>]> = [
  [
    "the console logger (local run)",
    async (run) => {
      const lines: string[] = [];
      await run(createConsoleLogger({ write: (line) => lines.push(line), secretValues: [TOKEN] }));
      return lines;
    },
  ],
  ["the Powertools logger (CloudWatch)", (run) => captureOutputOf(() => run(createLogger({ secretValues: [TOKEN] })))],
];

interface LoggedRecord {
  level: string;
  message: string;
  error?: { name: string; message: string; causes?: Array<{ name?: string; message: string }> };
}

describe.each(LOGGERS)("Could not provision, paused over an unreachable lease store, from %s", (_logger, linesOf) => {
  it.each([
    ["a denied role", () => failingStore(denied), "AccessDeniedException", "AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/provisioner is not authorized"],
    ["a store that never answers", () => failingStore(), "RoundTimeout", "the lease round did not complete within 20 ms"],
  ])("names %s under the pause", async (_what, store, causeName, causeText) => {
    // Act
    const lines = await linesOf((logger) => provisionOver(store(), logger));

    // Assert
    const records = lines.map((line) => JSON.parse(line) as LoggedRecord);
    const failed = records.find((record) => record.level === "ERROR" && record.message.startsWith(`Could not provision ${IDENTITY}`));
    expect(failed?.message).toContain("paused: the lease store for site local could not be reached: could not acquire or keep the lease for site local: ");
    expect(failed?.message).toContain(causeText);
    expect(failed?.error?.name).toBe("PausedError");
    const causeNames = failed?.error?.causes?.map((cause) => cause.name);
    expect(causeNames?.[0]).toBe("LeaseStoreError");
    expect(causeNames?.at(-1)).toBe(causeName);
    expect(failed?.error?.message).toContain(causeText);
    expect(lines.join("\n")).not.toContain(TOKEN);
  });

  it("names both failures when a lease write timed out and the read that should settle it was denied", async () => {
    // Arrange
    const timedOut = () => Promise.reject(Object.assign(new Error("The operation was aborted due to timeout"), { name: "TimeoutError" }));
    const store: LeaseStore = { ...failingStore(denied), claim: timedOut, extend: timedOut };

    // Act
    const lines = await linesOf((logger) => provisionOver(store, logger));

    // Assert
    const failed = lines.map((line) => JSON.parse(line) as LoggedRecord).find((record) => record.message.startsWith(`Could not provision ${IDENTITY}`));
    expect(failed?.message).toContain("lease write outcome unknown (TimeoutError: The operation was aborted due to timeout) and the settling read failed: AccessDeniedException: ");
  });
});
