import { LambdaClient } from "@aws-sdk/client-lambda";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { LambdaHelperRunner } from "../../../lib/helper/lambda-runner";
import { createHelperRunner } from "../../../lib/aws/helper-runner";

const BROKERS = ["nats://broker.example.net:4222"];

describe("createHelperRunner", () => {
  it("runs `helper` as a process", () => {
    // Arrange
    const config = parseConfig({ helper: "/usr/local/bin/helper --x", broker_urls: BROKERS }, { env: {} });

    // Act
    const runner = createHelperRunner(config);

    // Assert
    expect(runner).toBeInstanceOf(ExecHelperRunner);
  });

  it("runs `helper_function` through Lambda", () => {
    // Arrange
    const config = parseConfig({ helper_function: "provision-helper", broker_urls: BROKERS }, { env: {} });

    // Act
    const runner = createHelperRunner(config, new LambdaClient({ region: "eu-west-1" }));

    // Assert
    expect(runner).toBeInstanceOf(LambdaHelperRunner);
  });
});
