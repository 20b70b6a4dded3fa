import { describe, expect, it } from "vitest";
import { appSettingsFromEnv, tableArnRegion } from "../../../lib/aws/settings";
import { AppSettingsError } from "../../../lib/errors";

const ENV = {
  PROVISIONER_CONFIG_YAML: "site: lon",
  ADMISSION_TABLE: "admission",
  HOST_WORK_QUEUE_URL: "https://sqs.eu-west-2.amazonaws.com/123456789012/hw",
  HOST_WORK_DLQ_URL: "https://sqs.eu-west-2.amazonaws.com/123456789012/hw-dlq",
  LIFECYCLE_QUEUE_URL: "https://sqs.eu-west-2.amazonaws.com/123456789012/lc",
  LIFECYCLE_DLQ_URL: "https://sqs.eu-west-2.amazonaws.com/123456789012/lc-dlq",
  AWS_REGION: "eu-west-2",
};

describe("the lease table setting", () => {
  it("takes a table ARN in another Region (the site's home Region) and reports that Region", () => {
    const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-lease";
    const settings = appSettingsFromEnv({ ...ENV, LEASE_TABLE: arn });

    expect(settings.leaseTable).toBe(arn);
    expect(tableArnRegion(settings.leaseTable ?? "")).toBe("eu-west-1");
    expect(settings.region).toBe("eu-west-2");
  });

  it("leaves a plain table name in the functions' own Region", () => {
    expect(tableArnRegion("choria-provisioner-prod-lease")).toBeUndefined();
    expect(tableArnRegion("arn:aws-cn:dynamodb:cn-north-1:123456789012:table/lease")).toBe("cn-north-1");
  });

  it("refuses an ARN that is not a DynamoDB table's, naming the variable", () => {
    expect(() => appSettingsFromEnv({ ...ENV, LEASE_TABLE: "arn:aws:sqs:eu-west-1:123456789012:lease" })).toThrow(AppSettingsError);
    expect(() => appSettingsFromEnv({ ...ENV, LEASE_TABLE: "arn:aws:sqs:eu-west-1:123456789012:lease" })).toThrow(/LEASE_TABLE/);
  });
});

describe("the functions' environment", () => {
  it("names every bad variable in one error, each with what is wrong", () => {
    const broken = { ...ENV, ADMISSION_TABLE: "", HOST_WORK_DLQ_URL: "work-dlq", RETRY_BASE_DELAY_SECONDS: "30s", HOST_FAILURE_LIMIT: "0" };

    let thrown: unknown;
    try {
      appSettingsFromEnv(broken);
    } catch (error) {
      thrown = error;
    }

    expect(thrown).toBeInstanceOf(AppSettingsError);
    expect((thrown as AppSettingsError).problems).toEqual([
      { variable: "ADMISSION_TABLE", message: "is required" },
      { variable: "HOST_WORK_DLQ_URL", message: '"work-dlq" is not a URL' },
      { variable: "RETRY_BASE_DELAY_SECONDS", message: "must be a whole number of seconds" },
      { variable: "HOST_FAILURE_LIMIT", message: "must be a whole number of at least 1" },
    ]);
    expect((thrown as Error).message).toBe(
      'invalid environment variables: ADMISSION_TABLE: is required; HOST_WORK_DLQ_URL: "work-dlq" is not a URL; RETRY_BASE_DELAY_SECONDS: must be a whole number of seconds; HOST_FAILURE_LIMIT: must be a whole number of at least 1',
    );
  });

  it("reads the Region from AWS_DEFAULT_REGION when AWS_REGION is unset, and ignores blank values", () => {
    const { AWS_REGION: _unused, ...withoutRegion } = ENV;

    expect(appSettingsFromEnv({ ...withoutRegion, AWS_DEFAULT_REGION: "eu-west-1" }).region).toBe("eu-west-1");
    expect(appSettingsFromEnv({ ...ENV, AWS_REGION: "  ", AWS_DEFAULT_REGION: "eu-west-1" }).region).toBe("eu-west-1");
    expect(appSettingsFromEnv({ ...ENV, LIFECYCLE_STREAM: " " }).lifecycleStream).toBe("CHORIA_LIFECYCLE");
  });

  it("takes the whole configuration from PROVISIONER_CONFIG or PROVISIONER_CONFIG_YAML and refuses neither", () => {
    const { PROVISIONER_CONFIG_YAML: _yaml, ...withoutConfig } = ENV;

    expect(appSettingsFromEnv({ ...withoutConfig, PROVISIONER_CONFIG: "/etc/provisioner.yaml" }).admissionTable).toBe("admission");
    expect(() => appSettingsFromEnv(withoutConfig)).toThrow(/PROVISIONER_CONFIG_YAML: set PROVISIONER_CONFIG_YAML/);
  });
});
