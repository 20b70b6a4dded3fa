import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { encodeLifecycleEvent, parseLifecycleEvent } from "../../lib/choria/lifecycle";

// The upstream Choria fixtures (shared/fixtures/choria, next to this repository).
const FIXTURES = join(__dirname, "..", "..", "..", "shared", "fixtures", "choria");
const fixtureText = (...path: string[]) => readFileSync(join(FIXTURES, ...path), "utf8");
const fixtureJson = <T = Record<string, unknown>>(...path: string[]) => JSON.parse(fixtureText(...path)) as T;

const encoder = new TextEncoder();

describe("go-choria lifecycle fixtures", () => {
  it("parses the Choria-format shutdown event and re-encodes it in Go's field order", () => {
    const text = fixtureText("lifecycle", "choriaFormatShutdown.json");

    const event = parseLifecycleEvent(encoder.encode(text));

    expect(event).toEqual({ type: "shutdown", id: "cb6f1dbc-d65b-49b9-907e-e4a51bee75f8", identity: "dev1.devco.net", component: "server", timestamp: 1575482338 });
    expect(new TextDecoder().decode(encodeLifecycleEvent(event, "choria"))).toBe(JSON.stringify(JSON.parse(text)));
  });

  it("parses the CloudEvents shutdown event and re-encodes the same CloudEvent", () => {
    const fixture = fixtureJson("lifecycle", "cloudEventFormatShutdown.json");

    const event = parseLifecycleEvent(encoder.encode(JSON.stringify(fixture)));
    const ours = JSON.parse(new TextDecoder().decode(encodeLifecycleEvent(event, "cloudevents")));

    expect(event).toMatchObject({ type: "shutdown", identity: "ginkgo.example.net", component: "ginkgo", timestamp: 1535106973 });
    // Shutdown events carry no version in Go's struct; the fixture's data has one, which we ignore.
    const { version: _ignored, ...dataWithoutVersion } = fixture.data as Record<string, unknown>;
    expect(ours).toEqual({ ...fixture, datacontenttype: "application/json", data: dataWithoutVersion });
  });
});
