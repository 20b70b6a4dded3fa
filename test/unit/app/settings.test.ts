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
