/**
 * The key table (lib/config/keys.ts) is the one definition of every configuration key: what is
 * derived from it stays what it was written as by hand, and docs/configuration.md documents
 * exactly its keys with its defaults.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { FUNCTION_SETTINGS, REFERENCE_SETTINGS, SECRET_KEYS } from "../../../lib/config/secrets";
import { ENV_OVERRIDABLE, SETTINGS, type KeySpec } from "../../../lib/config/keys";

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

  it("derives the reference settings the loader and the deploy check use: every secret, and every key or certificate file", () => {
    // Arrange: the settings that name a key or certificate file and may instead be a reference to the PEM (or hex key) itself.
    const keyFileSettings = [...SETTINGS].filter(([, spec]) => spec.reference === "material").map(([name]) => name);

    // Assert
    expect([...keyFileSettings].sort()).toEqual(["jwt_verify_cert", "tls.ca", "tls.cert", "tls.key"]);
    expect([...REFERENCE_SETTINGS].sort()).toEqual(
      [...new Set([...SECRET_KEYS, ...keyFileSettings])].sort(),
    );
  });

  it("says for every reference-capable setting which functions resolve it", () => {
    // Assert
    for (const [name, spec] of SETTINGS) expect(spec.reference === undefined || spec.usedBy !== undefined, name).toBe(true);
    expect(FUNCTION_SETTINGS.status).toEqual([]);
    expect(FUNCTION_SETTINGS.release).toEqual([]);
    expect([...FUNCTION_SETTINGS.provision].sort()).toEqual([...REFERENCE_SETTINGS].sort());
    expect([...FUNCTION_SETTINGS.discover].sort()).toEqual(
      ["broker_provisioning_password", "client_jwt", "client_seed", "nats_token", "tls.ca", "tls.cert", "tls.key"],
    );
  });

  it("takes PROVISIONER_<KEY> overrides for every top-level key but the nested sections and cert_deny_list, read by its type", () => {
    // Arrange
    const kindOf = (schema: z.ZodType) =>
      schema.safeParse(true).success ? "boolean" : schema.safeParse(["a"]).success ? "list" : [1, 30].some((n) => schema.safeParse(n).success) ? "integer" : "string";
    const topLevel = SETTINGS.filter(([name]) => !name.includes(".") && name !== "cert_deny_list");

    // Assert
    expect(ENV_OVERRIDABLE).toEqual(Object.fromEntries(topLevel.map(([name, spec]) => [name, kindOf(spec.schema)])));
    expect(Object.keys(ENV_OVERRIDABLE)).toEqual(expect.arrayContaining(["workers", "leader_election", "broker_urls", "rpc_ttl", "token", "site"]));
  });
});
