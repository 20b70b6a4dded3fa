/**
 * `client_seed` (protocol_version 2) is checked where the configuration is validated, with a
 * ConfigError naming the key, not when the first broker connection decodes it. A reference is
 * checked once resolved: `parseConfig` keeps it as written.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { ConfigError } from "../../../lib/errors";

const V2 = { helper: "/usr/local/bin/helper", broker_urls: ["nats://broker.example.net:4222"], protocol_version: 2, client_jwt: "a.b.c" };
const SEED = "0123456789abcdef".repeat(4);

function configErrorOf(clientSeed: string): unknown {
  try {
    parseConfig({ ...V2, client_seed: clientSeed }, { env: {} });
    return "accepted";
  } catch (error) {
    return error;
  }
}

describe("client_seed", () => {
  it.each([
    ["not hex", "z".repeat(64)],
    ["odd length", "abc"],
    ["31 bytes", "ab".repeat(31)],
    ["33 bytes", "ab".repeat(33)],
    ["a file path", "/etc/choria/client.seed"],
  ])("%s is a ConfigError naming client_seed, without the value", (_case, value) => {
    // Act
    const error = configErrorOf(value);

    // Assert
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).key).toBe("client_seed");
    expect((error as ConfigError).message).toMatch(/hex encoded 32 byte ed25519 seed/);
    expect((error as ConfigError).message).not.toContain(value);
  });

  it.each([
    ["a hex seed", SEED],
    ["upper case hex with a trailing newline", `${SEED.toUpperCase()}\n`],
    ["an unresolved reference", "ssm:/choria/client-seed"],
  ])("accepts %s", (_case, value) => {
    // Act
    const config = parseConfig({ ...V2, client_seed: value }, { env: {} });

    // Assert
    expect(config.clientSeed).toBe(value);
  });
});
