import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../lib/errors";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject, parseLifecycleEvent } from "../../../lib/choria/lifecycle";
import { LIFECYCLE_TYPES } from "../../support/choria-node/lifecycle-types";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const bytes = (value: unknown) => encoder.encode(JSON.stringify(value));

// The go-choria lifecycle test's startup event (docs/protocol.md §8), built from its parts here.
const ID = "01e72410-d734-4611-9485-8c6a2dd2579b";
const startup = buildLifecycleEvent({
  type: "startup",
  identity: "ginkgo.example.net",
  component: "ginkgo",
  version: "1.2.3",
  timestampMs: 1535106973_000,
  id: ID,
});

describe("lifecycle subjects", () => {
  it("puts type then component under choria.lifecycle.event", () => {
    expect(lifecycleSubject("startup", "provision_mode_server")).toBe("choria.lifecycle.event.startup.provision_mode_server");
  });
});

describe("buildLifecycleEvent", () => {
  it("generates a dashed UUIDv4 id and whole seconds", () => {
    const event = buildLifecycleEvent({ type: "shutdown", identity: "n1", component: "server", timestampMs: 1_700_000_000_999 });

    expect(event.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(event.timestamp).toBe(1_700_000_000);
    expect(event.version).toBeUndefined();
  });
});

describe("encodeLifecycleEvent", () => {
  it("renders the Choria format with Go's field order", () => {
    const text = decoder.decode(encodeLifecycleEvent(startup, "choria"));

    expect(text).toBe(
      `{"protocol":"io.choria.lifecycle.v1.startup","id":"${ID}","identity":"ginkgo.example.net","component":"ginkgo","timestamp":1535106973,"version":"1.2.3"}`,
    );
  });

  it("wraps the same object as a CloudEvent with an RFC 3339 UTC time", () => {
    const text = decoder.decode(encodeLifecycleEvent(startup, "cloudevents"));

    const data = decoder.decode(encodeLifecycleEvent(startup, "choria"));
    expect(text).toBe(
      `{"specversion":"1.0","id":"${ID}","source":"io.choria.lifecycle","type":"io.choria.lifecycle.v1.startup","subject":"ginkgo.example.net","datacontenttype":"application/json","time":"2018-08-24T10:36:13Z","data":${data}}`,
    );
  });

  it("adds new_version to upgraded events and omits version from shutdown events", () => {
    const upgraded = buildLifecycleEvent({ type: "upgraded", identity: "n", component: "server", version: "1", newVersion: "2", timestampMs: 0, id: "x" });
    const shutdown = buildLifecycleEvent({ type: "shutdown", identity: "n", component: "server", version: "1", timestampMs: 0, id: "x" });

    expect(JSON.parse(decoder.decode(encodeLifecycleEvent(upgraded, "choria")))).toMatchObject({ version: "1", new_version: "2" });
    expect(Object.keys(JSON.parse(decoder.decode(encodeLifecycleEvent(shutdown, "choria"))))).toEqual([
      "protocol",
      "id",
      "identity",
      "component",
      "timestamp",
    ]);
  });
});

describe("parseLifecycleEvent", () => {
  it.each(LIFECYCLE_TYPES)("round-trips %s events in both formats", (type) => {
    const event = buildLifecycleEvent({
      type,
      identity: "node1.example.net",
      component: "provision_mode_server",
      version: "0.30.0",
      newVersion: "0.31.0",
      governor: { governor: "PROV", sequence: 3, eventType: "obtain" },
      timestampMs: 1_700_000_000_000,
    });

    for (const format of ["choria", "cloudevents"] as const) {
      expect(parseLifecycleEvent(encodeLifecycleEvent(event, format))).toEqual(event);
    }
  });

  it("normalises legacy choria:lifecycle:<type>:1 protocol ids", () => {
    const legacy = bytes({ protocol: "choria:lifecycle:startup:1", id: ID, identity: "n1", component: "server", timestamp: 1, version: "1" });

    expect(parseLifecycleEvent(legacy)).toMatchObject({ type: "startup", identity: "n1", version: "1" });
  });

  const valid = { protocol: "io.choria.lifecycle.v1.startup", id: ID, identity: "n1", component: "server", timestamp: 1, version: "1" };
  it.each([
    ["protocol", { ...valid, protocol: "io.choria.lifecycle.v1.exploded" }],
    ["protocol", { ...valid, protocol: 7 }],
    ["id", { ...valid, id: "" }],
    ["identity", { ...valid, identity: undefined }],
    ["identity", { ...valid, identity: "a.>" }],
    ["identity", { ...valid, identity: "a b" }],
    ["component", { ...valid, component: 1 }],
    ["timestamp", { ...valid, timestamp: "1" }],
    ["timestamp", { ...valid, timestamp: 1.5 }],
    ["version", { ...valid, version: 1 }],
  ])("rejects a Choria event with a bad %s", (field, value) => {
    expect(() => parseLifecycleEvent(bytes(value))).toThrow(new RegExp(`"${field}"`));
  });

  const cloud = { specversion: "1.0", id: ID, source: "io.choria.lifecycle", type: "io.choria.lifecycle.v1.startup", subject: "n1", time: "2018-08-24T10:36:13Z", data: valid };
  it.each([
    ["specversion", { ...cloud, specversion: "0.3" }],
    ["source", { ...cloud, source: "elsewhere" }],
    ["type", { ...cloud, type: "io.choria.lifecycle.v1.shutdown" }],
    ["id", { ...cloud, id: "other" }],
    ["data", { ...cloud, data: "{}" }],
    ["data.identity", { ...cloud, data: { ...valid, identity: "*" } }],
    ["time", { ...cloud, time: 5 }],
  ])("rejects a CloudEvent with a bad %s", (field, value) => {
    expect(() => parseLifecycleEvent(bytes(value))).toThrow(new RegExp(`"${field.replace(".", "\\.")}"`));
  });

  it("rejects non-JSON, non-objects and oversized messages with InvalidInputError", () => {
    expect(() => parseLifecycleEvent(encoder.encode("{"))).toThrow(InvalidInputError);
    expect(() => parseLifecycleEvent(bytes([valid]))).toThrow(InvalidInputError);
    expect(() => parseLifecycleEvent(bytes(valid), 10)).toThrow(/exceed the 10 byte limit/);
  });
});
