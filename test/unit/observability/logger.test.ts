import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { secretValues } from "../../../lib/config/keys";
import { createLogger } from "../../../lib/aws/powertools-logger";
import { LeaseStoreError, messageOf } from "../../../lib/errors";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import { captureOutput } from "../../support/capture";

const SECRETS = {
  token: "provision-token-123456",
  broker_provisioning_password: "broker-password-123456",
  nats_token: "nats-token-123456",
};
const config = parseConfig(
  { helper: "/bin/helper", broker_urls: ["nats://b.example.net:4222"], site: "lon", ...SECRETS },
  { env: {} },
);

function leakedIn(lines: string[]): string[] {
  return Object.values(SECRETS).filter((secret) => lines.some((line) => line.includes(secret)));
}

describe("createLogger (Powertools)", () => {
  it("writes structured JSON with attributes and never a secret", () => {
    // Arrange
    const logger = createLogger({ serviceName: "test", level: "debug", secretValues: secretValues(config) });

    // Act
    const lines = captureOutput(() => {
      logger.info("loaded configuration", { config, identity: "n1" });
      logger.warn(`broker refused password ${SECRETS.broker_provisioning_password}`);
      logger.error("rpc failed", { natsToken: "some-other-token", error: new Error(`bad token ${SECRETS.token}`) });
      logger.debug("raw", { whatever: SECRETS.nats_token });
    });

    // Assert
    expect(lines).toHaveLength(4);
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records[0]).toMatchObject({ level: "INFO", message: "loaded configuration", identity: "n1", service: "test" });
    expect((records[0]?.config as Record<string, unknown>).token).toBe("[redacted]");
    expect(records[2]?.natsToken).toBe("[redacted]");
    expect(leakedIn(lines)).toEqual([]);
  });

  it("respects the level", () => {
    // Arrange
    const logger = createLogger({ level: "warn" });

    // Act
    const lines = captureOutput(() => {
      logger.info("hidden");
      logger.warn("shown");
    });

    // Assert
    expect(lines.map((line) => (JSON.parse(line) as { message: string }).message)).toEqual(["shown"]);
  });
});

describe("createConsoleLogger", () => {
  it("writes one JSON line per record with masking and level filtering", () => {
    // Arrange
    const lines: string[] = [];
    const logger = createConsoleLogger({
      level: "info",
      secretValues: secretValues(config),
      write: (line) => lines.push(line),
      now: () => Date.UTC(2026, 0, 2, 3, 4, 5),
    });

    // Act
    logger.debug("dropped");
    logger.info(`using ${SECRETS.token}`, { config, site: "lon" });
    logger.error("failed", { password: "hunter2" });

    // Assert
    expect(lines).toHaveLength(2);
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({
      level: "INFO",
      message: "using [redacted]",
      timestamp: "2026-01-02T03:04:05.000Z",
      site: "lon",
    });
    expect(JSON.parse(lines[1] ?? "")).toMatchObject({ level: "ERROR", password: "[redacted]" });
    expect(leakedIn(lines)).toEqual([]);
  });
});

describe("the message of a record with an error", () => {
  const messages = (log: (logger: ReturnType<typeof createConsoleLogger>) => void) => {
    const lines: string[] = [];
    log(createConsoleLogger({ write: (line) => lines.push(line) }));
    return lines.map((line) => (JSON.parse(line) as { message: string }).message);
  };
  const timedOut = () => Object.assign(new Error("The operation was aborted due to timeout"), { name: "TimeoutError" });

  it("says only what it does not already say of the chain", () => {
    // Arrange
    const error = new LeaseStoreError("could not read the lease for site lon", { cause: timedOut() });

    // Act
    const logged = messages((logger) => {
      logger.error(`paused: ${error.message}`, { error });
      logger.error(`paused: ${messageOf(error)}`, { error });
    });

    // Assert
    expect(logged).toEqual([
      "paused: could not read the lease for site lon: TimeoutError: The operation was aborted due to timeout",
      "paused: could not read the lease for site lon: TimeoutError: The operation was aborted due to timeout",
    ]);
  });

  it("is left as it is when the error is already text", () => {
    // Act
    const logged = messages((logger) => logger.info("reading the lease again in 250 ms", { error: "could not read the lease: TimeoutError: aborted" }));

    // Assert
    expect(logged).toEqual(["reading the lease again in 250 ms"]);
  });
});
