/**
 * Credentials in a broker URL would be printed with it wherever the URL is (connection errors,
 * status): the configuration refuses them, naming the key that holds the password instead; and the
 * loggers mask any URL's userinfo as a second line of defence.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../lib/config/load";
import { parseConfig } from "../../../lib/config/config";
import { createLogger } from "../../../lib/aws/powertools-logger";
import { ConfigError } from "../../../lib/errors";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import { captureOutput } from "../../support/capture";

const PASSWORD = "Pa55w0rd-in-the-url";

function refusal(act: () => unknown): ConfigError {
  try {
    act();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError, the URL was accepted");
}

describe("a broker URL with credentials", () => {
  it.each([
    ["user and password", `nats://provisioner:${PASSWORD}@broker.example.net:4222`, 0],
    ["a password holding @ and /", `tls://provisioner:${PASSWORD}@x/y@broker.example.net:4222`, 0],
    ["a token", `nats://${PASSWORD}@broker.example.net:4222`, 1],
    ["no scheme", `provisioner:${PASSWORD}@broker.example.net:4222`, 0],
  ])("with %s is refused by its key, saying where the password goes, without printing it", (_what, url, index) => {
    // Arrange
    const urls = index === 0 ? [url] : ["nats://other.example.net:4222", url];

    // Act
    const error = refusal(() => parseConfig({ helper: "/usr/local/bin/helper", broker_urls: urls }, { env: {} }));

    // Assert
    expect(error.key).toBe(`broker_urls.${index}`);
    expect(error.message).toContain("broker_provisioning_password");
    expect(error.message).toContain("broker.example.net:4222");
    expect(`${error.message}\n${error.stack}`).not.toContain(PASSWORD);
  });

  it("given through PROVISIONER_BROKER_URLS is refused the same way", async () => {
    // Act
    const error = await loadConfig({
      env: {
        PROVISIONER_CONFIG_YAML: "helper: /usr/local/bin/helper\n",
        PROVISIONER_BROKER_URLS: `nats://p:${PASSWORD}@broker.example.net:4222`,
      },
    }).then(
      () => undefined,
      (e: unknown) => e as ConfigError,
    );

    // Assert
    expect(error).toBeInstanceOf(ConfigError);
    expect(error?.key).toBe("broker_urls.0");
    expect(error?.message).not.toContain(PASSWORD);
  });
});

describe("a URL with userinfo in a log line", () => {
  const url = `nats://provisioner:${PASSWORD}@broker.example.net:4222`;

  it("is masked by the console logger in the message, attributes and errors", () => {
    // Arrange
    const lines: string[] = [];
    const logger = createConsoleLogger({ write: (line) => lines.push(line) });

    // Act
    logger.error(`could not connect to ${url}`, { server: url, error: new Error(`connection to ${url} refused`) });

    // Assert
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(PASSWORD);
    expect(lines[0]).toContain("nats://[redacted]@broker.example.net:4222");
  });

  it("is masked by the Lambda logger", () => {
    // Arrange
    const logger = createLogger({ serviceName: "test" });

    // Act
    const lines = captureOutput(() => logger.warn("broker status", { servers: [url] }));

    // Assert
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(PASSWORD);
    expect(lines[0]).toContain("[redacted]@broker.example.net:4222");
  });
});
