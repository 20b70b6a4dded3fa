import { describe, expect, it } from "vitest";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import { appSettingsFromEnv } from "../../../lib/aws/settings";
import { AppSettingsError, InvalidInputError } from "../../../lib/errors";
import { mapLimited } from "../../../lib/app/concurrency";

describe("host-work messages", () => {
  it("round-trip through the queue body", () => {
    const work = { identity: "n1.example.net", term: 3, admittedAt: 1_700_000_000_000, source: "event" as const };

    const decoded = decodeHostWork(encodeHostWork(work));

    expect(decoded).toEqual(work);
  });

  it.each([
    ["not json", "not JSON"],
    [JSON.stringify({ v: 2, identity: "a", term: 1, admittedAt: 1, source: "event" }), '"v"'],
    [JSON.stringify({ v: 1, identity: "a.>", term: 1, admittedAt: 1, source: "event" }), '"identity"'],
    [JSON.stringify({ v: 1, identity: "a", term: -1, admittedAt: 1, source: "event" }), '"term"'],
    [JSON.stringify({ v: 1, identity: "a", term: 1, admittedAt: 1, source: "cron" }), '"source"'],
    [JSON.stringify({ v: 1, identity: "a", term: 1, admittedAt: 1, source: "event", extra: 1 }), "(message)"],
  ])("rejects %s naming the field", (body, field) => {
    expect(() => decodeHostWork(body)).toThrow(InvalidInputError);
    expect(() => decodeHostWork(body)).toThrow(field);
  });
});

describe("appSettingsFromEnv", () => {
  const env = {
    PROVISIONER_CONFIG_YAML: "site: lab",
    ADMISSION_TABLE: "admission",
    HOST_WORK_QUEUE_URL: "http://localhost/q/work",
    HOST_WORK_DLQ_URL: "http://localhost/q/work-dlq",
    LIFECYCLE_QUEUE_URL: "http://localhost/q/lifecycle",
    LIFECYCLE_DLQ_URL: "http://localhost/q/lifecycle-dlq",
  };

  it("fills the defaults", () => {
    const settings = appSettingsFromEnv(env);

    expect(settings).toMatchObject({ lifecycleStream: "CHORIA_LIFECYCLE", retryBaseDelaySeconds: 30, retryMaxDelaySeconds: 300 });
    expect(settings.leaseTable).toBeUndefined();
  });

  it.each(["ADMISSION_TABLE", "HOST_WORK_QUEUE_URL", "LIFECYCLE_DLQ_URL"])("names a missing %s", (name) => {
    const broken = { ...env, [name]: "" };

    expect(() => appSettingsFromEnv(broken)).toThrow(AppSettingsError);
    expect(() => appSettingsFromEnv(broken)).toThrow(name);
  });

  it("names a queue URL that is not a URL", () => {
    expect(() => appSettingsFromEnv({ ...env, HOST_WORK_DLQ_URL: "work-dlq" })).toThrow("HOST_WORK_DLQ_URL");
  });
});

describe("mapLimited", () => {
  it("never runs more tasks at once than its limit", async () => {
    let running = 0;
    let peak = 0;
    const task = async () => {
      running++;
      peak = Math.max(peak, running);
      await Promise.resolve();
      await Promise.resolve();
      running--;
    };

    await mapLimited(Array.from({ length: 7 }), 2, task);

    expect(peak).toBe(2);
  });
});
