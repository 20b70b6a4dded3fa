/** The deployed renew function on a configuration without renewal: it runs every minute in every deployment. */
import { describe, expect, it } from "vitest";
import { brokerFunction } from "../../../lib/aws/compose-broker-function";
import { renewFunction } from "../../../lib/aws/functions/renew";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { localAppSettings } from "../../support/app-settings";
import { RecordingLogger } from "../../support/fakes";

/** Nothing listens there: a run that reached for DynamoDB, SQS or a broker would fail. */
const UNREACHABLE = "http://127.0.0.1:1";
const NO_SERVICES = {
  tables: { lease: "lease", admission: "admission" },
  queues: { hostWork: `${UNREACHABLE}/q/a`, hostWorkDlq: `${UNREACHABLE}/q/b`, lifecycle: `${UNREACHABLE}/q/c`, lifecycleDlq: `${UNREACHABLE}/q/d` },
  dynamoEndpoint: UNREACHABLE,
  sqsUrl: UNREACHABLE,
};

describe("the renew function without renew.broker_urls", () => {
  it("does nothing and does not fail, so the schedule raises no error alarm where renewal is off", async () => {
    // Arrange
    const yaml = ["site: lon", "helper: /bin/true", "broker_urls: [nats://broker.example.net:4222]", "choria_insecure: true"].join("\n");
    const fn = await brokerFunction("renew", renewFunction)(localAppSettings(yaml, NO_SERVICES, { leaseTable: undefined }), {
      logger: new RecordingLogger(),
      metrics: new InMemoryMetrics("lon"),
    });

    // Act
    const result = await fn.renew({ remainingMs: () => 60_000 });
    await fn.close();

    // Assert
    expect(result).toEqual({ status: "not-configured" });
  });
});
