/**
 * A secret of the wrong shape is refused by the key and reference that gave it, with what it looks
 * like and what was expected, and never repeated: not in the error (nor its causes), not in a log
 * line. Before, such a value was taken as a file path and the start-up error printed it whole.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../lib/config/load";
import { parseConfig } from "../../../lib/config/config";
import { SECRET_KEYS, type SecretReference, type SecretResolver } from "../../../lib/config/secrets";
import { ConfigError, messageOf } from "../../../lib/errors";
import { createConsoleLogger } from "../../../dev/local/console-logger";

const BASE_YAML = ["helper: /usr/local/bin/helper", "broker_urls: [nats://broker.example.net:4222]", "site: lon"].join("\n");

const random = (bytes: number) => randomBytes(bytes).toString("hex");

interface WrongShape {
  name: string;
  /** The whole value, and the random part of it that must appear nowhere. */
  make: () => { value: string; secret: string };
  /** What the error should say it looks like. */
  looksLike: RegExp;
}

const plain = (make: () => string) => () => {
  const value = make();
  return { value, secret: value };
};
const SHAPES = {
  hex128: { name: "an ed25519 key as 128 hex", make: plain(() => random(64)), looksLike: /128 hexadecimal characters/ },
  keyValue: {
    name: "a Secrets Manager key/value JSON",
    make: () => {
      const secret = random(20);
      return { value: JSON.stringify({ username: "provisioner", password: secret }), secret };
    },
    looksLike: /Secrets Manager key\/value JSON with keys \[username, password\]/,
  },
  opaqueKeyValue: {
    name: "a key/value JSON whose key is itself secret",
    make: () => {
      const secret = random(20);
      return { value: JSON.stringify({ [secret]: "x" }), secret };
    },
    looksLike: /Secrets Manager key\/value JSON with 1 key\(s\)/,
  },
  multiline: {
    name: "several lines of text",
    make: () => {
      const secret = random(20);
      return { value: `first ${secret}\nsecond line`, secret };
    },
    looksLike: /2 lines of text/,
  },
  base64: { name: "base64 DER", make: plain(() => randomBytes(48).toString("base64")), looksLike: /characters of base64/ },
  jwt: {
    name: "a compact JWT",
    make: plain(() => `eyJ${random(10)}.${random(30)}.${random(30)}`),
    looksLike: /compact JWT/,
  },
  blank: { name: "blank", make: () => ({ value: "   ", secret: "   " }), looksLike: /empty value/ },
} satisfies Record<string, WrongShape>;

/** For each secret setting, values it cannot take; a file path is not among them for a reference. */
const WRONG: Record<(typeof SECRET_KEYS)[number], WrongShape[]> = {
  token: [SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.blank],
  broker_provisioning_password: [SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.blank],
  nats_token: [SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.blank],
  client_jwt: [SHAPES.hex128, SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.multiline, SHAPES.base64],
  client_seed: [SHAPES.hex128, SHAPES.keyValue, SHAPES.multiline, SHAPES.base64, SHAPES.jwt],
  jwt_signing_key: [SHAPES.hex128, SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.multiline, SHAPES.base64, SHAPES.jwt],
  jwt_signing_token: [SHAPES.hex128, SHAPES.keyValue, SHAPES.multiline, SHAPES.base64],
  "tls.key": [SHAPES.hex128, SHAPES.keyValue, SHAPES.opaqueKeyValue, SHAPES.multiline, SHAPES.base64, SHAPES.jwt],
};

function yamlSetting(setting: string, value: string): string {
  const [section, key] = setting.split(".", 2) as [string, string | undefined];
  return key === undefined ? `${section}: ${value}` : `${section}:\n  ${key}: ${value}`;
}

class OneSecret implements SecretResolver {
  constructor(private readonly value: string) {}
  async resolve(_reference: SecretReference): Promise<string> {
    return this.value;
  }
}

/** Everything a failed start shows: the error, its cause chain and stack, and every log line. */
async function startUp(setting: string, value: string): Promise<{ error: unknown; shown: string }> {
  const lines: string[] = [];
  const logger = createConsoleLogger({ level: "debug", write: (line) => lines.push(line) });
  const yaml = `${BASE_YAML}\n${yamlSetting(setting, "secretsmanager:prod/provisioner")}\n`;
  const error = await loadConfig({ env: { PROVISIONER_CONFIG_YAML: yaml }, secrets: new OneSecret(value), logger }).then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, shown: [messageOf(error), String((error as Error | undefined)?.stack), ...lines].join("\n") };
}

function thrownBy(act: () => unknown): ConfigError {
  try {
    act();
  } catch (error) {
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError, nothing was thrown");
}

const cases = SECRET_KEYS.flatMap((setting) => WRONG[setting].map((shape) => [setting, shape.name, shape] as const));

describe("a secret reference that resolves to the wrong shape", () => {
  it("every secret setting has wrong shapes under test", () => {
    // Assert
    for (const setting of SECRET_KEYS) expect(WRONG[setting].length).toBeGreaterThan(0);
  });

  it.each(cases)("%s as %s is refused by key and reference, and never shown", async (setting, _name, shape) => {
    // Arrange
    const { value, secret } = shape.make();

    // Act
    const { error, shown } = await startUp(setting, value);

    // Assert
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).key).toBe(setting);
    expect((error as ConfigError).message).toContain("secretsmanager:prod/provisioner resolved to");
    expect((error as ConfigError).message).toMatch(shape.looksLike);
    expect((error as ConfigError).message).toMatch(/expected /);
    if (secret.trim() !== "") expect(shown).not.toContain(secret);
  });

  it("a value of the right shape still loads", async () => {
    // Arrange
    const seed = random(32);
    const yaml = `${BASE_YAML}\n${yamlSetting("jwt_signing_key", "ssm:/provisioner/seed")}\n`;

    // Act
    const config = await loadConfig({ env: { PROVISIONER_CONFIG_YAML: yaml }, secrets: new OneSecret(seed) });

    // Assert
    expect(config.jwtSigningKey).toBe(seed);
  });
});

describe("a literal key setting that is neither the material nor a file path", () => {
  const literalCases = (["jwt_signing_key", "jwt_signing_token", "tls.key"] as const).flatMap((setting) =>
    [SHAPES.hex128, SHAPES.keyValue, SHAPES.multiline, SHAPES.base64].map((shape) => [setting, shape.name, shape] as const),
  );

  it.each(literalCases)("%s as %s is refused without being shown", (setting, _name, shape) => {
    // Arrange
    const { value, secret } = shape.make();
    const [section, key] = setting.split(".", 2) as [string, string | undefined];
    const document = {
      helper: "/usr/local/bin/helper",
      broker_urls: ["nats://broker.example.net:4222"],
      ...(key === undefined ? { [section]: value } : { [section]: { [key]: value } }),
    };

    // Act
    const error = thrownBy(() => parseConfig(document, { env: {} }));

    // Assert
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.key).toBe(setting);
    expect(error.message).toMatch(shape.looksLike);
    expect(`${messageOf(error)}\n${error.stack}`).not.toContain(secret);
  });

  it.each([
    ["jwt_signing_key", "config/files/signing.key"],
    ["jwt_signing_token", "/etc/choria/provisioner token.jwt"],
    ["tls.key", "/var/task/config/files/0123456789abcdef-private.pem"],
  ])("%s as the path %s is still a file path", (setting, path) => {
    // Arrange
    const [section, key] = setting.split(".", 2) as [string, string | undefined];
    const document = {
      helper: "/usr/local/bin/helper",
      broker_urls: ["nats://broker.example.net:4222"],
      ...(key === undefined ? { [section]: path } : { [section]: { [key]: path } }),
    };

    // Act
    const config = parseConfig(document, { env: {} });

    // Assert
    expect(JSON.stringify(config.redacted())).toContain("[redacted]");
  });
});
