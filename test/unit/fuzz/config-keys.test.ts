/**
 * Every configuration key, taken from the key table (lib/config/keys.ts) so a key added later is
 * covered too: a value of the wrong type gives a ConfigError naming exactly that key; keys with
 * rules beyond their type get semantically wrong values as well.
 */
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { parseConfig } from "../../../lib/config/config";
import { SETTINGS } from "../../../lib/config/keys";
import { ConfigError } from "../../../lib/errors";
import { recordScenario } from "../../support/chaos/scenario";

const MINIMAL = { helper: "/usr/local/bin/helper", broker_urls: ["nats://broker.example.net:4222"] };
const CANDIDATES: unknown[] = [42, "text", true, ["text"], { nested: "text" }, -1, 1.5];

function configErrorOf(document: Record<string, unknown>): ConfigError | string {
  try {
    parseConfig(document, { env: {} });
    return "accepted";
  } catch (error) {
    return error instanceof ConfigError ? error : `unexpected ${String(error)}`;
  }
}

/** Values of a type the key's schema rejects. */
function wrongTypes(schema: z.ZodType): unknown[] {
  return CANDIDATES.filter((value) => !schema.safeParse(value).success);
}

const topLevel = SETTINGS.filter(([key]) => !key.includes(".")).map(([key, spec]) => [key, spec.schema] as const);
const nested = SETTINGS.filter(([key]) => key.includes(".")).map(([key, spec]) => [key, spec.schema] as const);

/** Type-correct values that break a rule; `key` is what the ConfigError must name. */
const SEMANTIC: Array<{ set: Record<string, unknown>; key: string }> = [
  { set: { interval: "30s" }, key: "interval" },
  { set: { interval: "banana" }, key: "interval" },
  { set: { helper_timeout: "0s" }, key: "helper_timeout" },
  { set: { discovery_timeout: "-2s" }, key: "discovery_timeout" },
  { set: { server_jwt_validity: "forever" }, key: "server_jwt_validity" },
  { set: { lifecycle_component: "a.b" }, key: "lifecycle_component" },
  { set: { lifecycle_component: "a>" }, key: "lifecycle_component" },
  { set: { lifecycle_component: "*" }, key: "lifecycle_component" },
  { set: { loglevel: "trace" }, key: "loglevel" },
  { set: { workers: -1 }, key: "workers" },
  { set: { monitor_port: 70_000 }, key: "monitor_port" },
  { set: { broker_port: -1 }, key: "broker_port" },
  { set: { rpc_ttl: 10 }, key: "rpc_ttl" },
  { set: { protocol_version: 3 }, key: "protocol_version" },
  { set: { protocol_version: 2 }, key: "client_jwt" },
  { set: { protocol_version: 2, client_jwt: "a.b.c" }, key: "client_seed" },
  { set: { broker_urls: [] }, key: "broker_urls" },
  { set: { broker_urls: ["http://broker:4222"] }, key: "broker_urls.0" },
  { set: { broker_urls: ["nats://a:1", "nats://"] }, key: "broker_urls.1" },
  { set: { cert_deny_list: ["ok", "(unclosed"] }, key: "cert_deny_list.1" },
  { set: { helper: "" }, key: "helper" },
  { set: { helper_function: "arn:aws:lambda:x" }, key: "helper_function" },
  { set: { features: { pki: true, ed25519: true } }, key: "features.ed25519" },
  { set: { features: { upgrades: true } }, key: "upgrades_repository" },
  { set: { lease: { duration: "10s", renew_interval: "8s", skew_bound: "5s" } }, key: "lease.renew_interval" },
  { set: { lease: { duration: "0s" } }, key: "lease.duration" },
  { set: { lease: { skew_bound: "-1s" } }, key: "lease.skew_bound" },
  { set: { lease: { renew_interval: "soon" } }, key: "lease.renew_interval" },
];

describe("every invalid configuration key gives a ConfigError naming it", () => {
  it("covers every key of the schema, top level and nested", () => {
    // Assert
    expect(topLevel.length + nested.length).toBeGreaterThan(40);
    for (const [key, schema] of [...topLevel, ...nested]) expect(wrongTypes(schema), key).not.toEqual([]);
  });

  it.each(topLevel.map(([key, schema]) => [key, schema] as const))("%s with a value of the wrong type", (key, schema) => {
    // Arrange
    const values = wrongTypes(schema);

    // Act
    const errors = values.map((value) => configErrorOf({ ...MINIMAL, [key]: value }));

    // Assert
    for (const error of errors) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).key.split(".")[0]).toBe(key);
      expect((error as ConfigError).message).toContain(`"${key}`);
    }
  });

  it.each(nested.map(([key, schema]) => [key, schema] as const))("%s with a value of the wrong type", (dotted, schema) => {
    // Arrange
    const [section, key] = dotted.split(".") as [string, string];
    const values = wrongTypes(schema);

    // Act
    const errors = values.map((value) => configErrorOf({ ...MINIMAL, [section]: { [key]: value } }));

    // Assert
    for (const error of errors) {
      expect(error).toBeInstanceOf(ConfigError);
      // A list's error may name the entry that is wrong (`renew.windows.0`): still that key.
      expect((error as ConfigError).key).toMatch(new RegExp(`^${dotted.replace(".", "\\.")}(\\.\\d+)?$`));
    }
  });

  it.each(SEMANTIC.map((entry) => [entry.key, JSON.stringify(entry.set), entry.set] as const))("%s rejects %s", (key, _shown, set) => {
    // Act
    const error = configErrorOf({ ...MINIMAL, ...set });

    // Assert
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).key).toBe(key);
  });

  it("records the figures for the reliability report", ({ task }) => {
    // Arrange
    const badInputs = [...topLevel, ...nested].reduce((sum, [, schema]) => sum + wrongTypes(schema).length, 0) + SEMANTIC.length;

    // Assert
    expect(badInputs).toBeGreaterThan(SEMANTIC.length);
    recordScenario(task, { area: "config", badInputs });
  });
});
