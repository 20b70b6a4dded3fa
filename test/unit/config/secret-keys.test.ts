/**
 * The secret list is one fact: every setting the configuration calls a secret is masked in every
 * rendering of the config and in log output, and `secretValues()` returns exactly the values of
 * those settings. Written against the list itself, so a secret added later is covered too.
 */
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { secretValues } from "../../../lib/config/keys";
import { SECRET_KEYS } from "../../../lib/config/secrets";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import { isSecretAttributeName } from "../../../lib/observability/redact";

const MINIMAL = { helper: "/usr/local/bin/helper", broker_urls: ["nats://broker.example.net:4222"] };
/** A value of the setting's format, distinct per setting, long enough for value masking. */
const SAMPLE: Record<string, string> = { client_seed: "7".repeat(64) };

function withSetting(document: Record<string, unknown>, setting: string, value: string): Record<string, unknown> {
  const [section, key] = setting.split(".", 2) as [string, string | undefined];
  if (key === undefined) return { ...document, [section]: value };
  return { ...document, [section]: { ...(document[section] as Record<string, unknown> | undefined), [key]: value } };
}

function valueAt(view: Record<string, unknown>, setting: string): unknown {
  return setting.split(".").reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], view);
}

const valueFor = (setting: string) => SAMPLE[setting] ?? `secret-of-${setting}-0123456789`;
const everySecret = () =>
  SECRET_KEYS.reduce<Record<string, unknown>>((document, setting) => withSetting(document, setting, valueFor(setting)), {
    ...MINIMAL,
    protocol_version: 2,
  });

describe("the configuration's secret list", () => {
  it("includes every credential, nested ones too", () => {
    // Assert
    expect(SECRET_KEYS).toEqual(
      expect.arrayContaining(["broker_provisioning_password", "client_jwt", "client_seed", "jwt_signing_key", "jwt_signing_token", "nats_token", "tls.key", "token"]),
    );
  });

  it.each([...SECRET_KEYS])("%s is masked in JSON, redacted(), util.inspect and is one of secretValues()", (setting) => {
    // Arrange
    const value = valueFor(setting);
    const config = parseConfig(withSetting(everySecret(), setting, value), { env: {} });

    // Act
    const renderings = [JSON.stringify(config), JSON.stringify(config.redacted()), inspect(config, { depth: 5 })];

    // Assert
    for (const rendering of renderings) expect(rendering).not.toContain(value);
    expect(valueAt(config.redacted(), setting)).toBe("[redacted]");
    expect(secretValues(config)).toContain(value);
  });

  it("secretValues() returns the values of the secret settings and nothing else", () => {
    // Arrange
    const config = parseConfig({ ...everySecret(), site: "site-with-a-long-name", identity: "identity-long-enough" }, { env: {} });

    // Act
    const values = secretValues(config);

    // Assert
    expect([...values].sort()).toEqual(SECRET_KEYS.map(valueFor).sort());
  });

  it.each([...SECRET_KEYS])("a log line never shows %s, under any attribute name or inside a message", (setting) => {
    // Arrange
    const value = valueFor(setting);
    const config = parseConfig(everySecret(), { env: {} });
    const lines: string[] = [];
    const logger = createConsoleLogger({ level: "debug", secretValues: secretValues(config), write: (line) => lines.push(line) });

    // Act
    logger.info("loaded configuration", { config });
    logger.warn(`connecting with ${value}`);
    logger.error("failed", { innocent: value, error: new Error(`refused ${value}`) });

    // Assert
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).not.toContain(value);
  });

  it.each([...SECRET_KEYS])("%s is also recognised as a secret by its attribute name", (setting) => {
    // Arrange
    const last = setting.split(".").at(-1) as string;
    const camel = setting.replace(/[._]([a-z])/g, (_, letter: string) => letter.toUpperCase());

    // Assert
    for (const name of [setting, last, camel]) expect(isSecretAttributeName(name), name).toBe(true);
  });
});
