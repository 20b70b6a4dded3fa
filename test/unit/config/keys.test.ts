/**
 * The key table (lib/config/keys.ts) is the one definition of every configuration key: what is
 * derived from it stays what it was written as by hand, and docs/configuration.md documents
 * exactly its keys with its defaults.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { KEY_FILE_SETTINGS, REFERENCE_SETTINGS, SECRET_KEYS, SETTINGS, type KeySpec } from "../../../lib/config";
import { ENV_OVERRIDABLE } from "../../../lib/config/keys";

const DOC = readFileSync(new URL("../../../docs/configuration.md", import.meta.url), "utf8");

/** `| \`a\`, \`b\` | type | default | notes |` rows of the key tables: each key with its Default cell. */
function documentedKeys(): Map<string, string> {
  const keys = new Map<string, string>();
  for (const line of DOC.split("\n")) {
    const cells = line.split("|").map((cell) => cell.trim());
    if (cells.length < 5 || !/^`[a-z_.0-9]+`/.test(cells[1] ?? "")) continue;
    for (const match of (cells[1] ?? "").matchAll(/`([a-z_.0-9]+)`/g)) keys.set(match[1] as string, cells[3] ?? "");
  }
  return keys;
}

/** The schema's default (through preprocessing and optionality), as the docs write it. */
function documentedDefault(spec: KeySpec): string {
  if (spec.computedDefault !== undefined) return spec.computedDefault;
  let schema = spec.schema as unknown as { def: { type: string; out?: unknown; defaultValue?: unknown } };
  while (schema.def.type === "pipe") schema = schema.def.out as typeof schema;
  if (schema.def.type !== "default") return "-";
  const value = schema.def.defaultValue;
  if (Array.isArray(value)) return `the ${value.length} defaults below`;
  return value === "" ? '`""`' : `\`${String(value)}\``;
}

describe("the configuration key table", () => {
  it("documents every key in docs/configuration.md, and nothing else", () => {
    // Act
    const documented = documentedKeys();

    // Assert
    expect([...documented.keys()].sort()).toEqual(SETTINGS.map(([name]) => name).sort());
  });

  it.each(SETTINGS.map(([name, spec]) => [name, spec] as const))("docs/configuration.md states the default of %s", (name, spec) => {
    // Assert
    expect(documentedKeys().get(name)).toBe(documentedDefault(spec));
  });

  it("documents the default cert_deny_list", () => {
    // Arrange
    const defaults = (SETTINGS.find(([name]) => name === "cert_deny_list")?.[1].schema as z.ZodType).parse(undefined) as string[];

    // Assert
    expect(defaults.length).toBeGreaterThan(0);
    for (const pattern of defaults) expect(DOC).toContain(`\`${pattern}\``);
  });

  it("documents every secret and every reference-capable setting in the references table", () => {
    // Arrange
    const section = DOC.slice(DOC.indexOf("## Secrets, keys and certificates"), DOC.indexOf("## Keys kept from the Go daemon"));

    // Assert
    for (const setting of REFERENCE_SETTINGS) expect(section, setting).toContain(`\`${setting}\``);
  });

  it("lets every secret be a reference, so a deployment can keep it out of its template", () => {
    // Assert
    expect(SECRET_KEYS.filter((setting) => !(REFERENCE_SETTINGS as readonly string[]).includes(setting))).toEqual([]);
  });

  it("derives the reference settings and key file settings the loader and the deploy check use", () => {
    // Assert
    expect([...KEY_FILE_SETTINGS].sort()).toEqual(["jwt_verify_cert", "tls.ca", "tls.cert", "tls.key"]);
    expect([...REFERENCE_SETTINGS].sort()).toEqual(
      [...new Set([...SECRET_KEYS, ...KEY_FILE_SETTINGS])].sort(),
    );
  });

  it("takes PROVISIONER_<KEY> overrides for the top-level scalars and broker_urls, read by their type", () => {
    // Assert
    expect(ENV_OVERRIDABLE).toEqual({
      workers: "integer",
      interval: "string",
      logfile: "string",
      loglevel: "string",
      helper: "string",
      token: "string",
      lifecycle_component: "string",
      choria_insecure: "boolean",
      site: "string",
      monitor_port: "integer",
      broker_port: "integer",
      broker_provisioning_password: "string",
      jwt_verify_cert: "string",
      jwt_signing_key: "string",
      jwt_signing_token: "string",
      server_jwt_validity: "string",
      rego_policy: "string",
      leader_election: "boolean",
      upgrades_repository: "string",
      upgrades_optional: "boolean",
      broker_urls: "list",
      identity: "string",
      callerid: "string",
      protocol_version: "integer",
      client_jwt: "string",
      client_seed: "string",
      nats_token: "string",
      deployment_id: "string",
      helper_function: "string",
      helper_timeout: "string",
      rpc_ttl: "integer",
      discovery_timeout: "string",
      discovery_max_nodes: "integer",
    });
  });
});
