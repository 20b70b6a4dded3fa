import { randomUUID } from "node:crypto";
import { DescribeTimeToLiveCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ADMISSION_TTL_ATTRIBUTE, DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { createAdmissionTable } from "../../../dev/local/resources";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { AdmissionStoreError } from "../../../lib/ports/admission-store";
import { LOCAL_AWS, freePort } from "../../../dev/local/services";
import { RecordingMetrics } from "../../support/fakes";
import { describeExpiryRules } from "../../support/contracts/expiry-rules";
import { describeRegistryRules } from "../../support/contracts/registry-rules";

const TABLE = `admission-it-${randomUUID()}`;
let client: DynamoDBClient;

beforeAll(async () => {
  client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  await createAdmissionTable(client, TABLE);
});
afterAll(() => client?.destroy());

describeRegistryRules("DynamoDB Local", () => new DynamoDbAdmissionStore({ client, tableName: TABLE }));
describeExpiryRules("DynamoDB Local", () => new DynamoDbAdmissionStore({ client, tableName: TABLE }));

describe("DynamoDB admission table", () => {
  it("is created with TTL on the expiry attribute and stores it in epoch seconds", async () => {
    const store = new DynamoDbAdmissionStore({ client, tableName: TABLE });
    const registry = new AdmissionRegistry({ site: "ttl", intervalMs: 60_000 }, { store, metrics: new RecordingMetrics() });

    const work = await registry.admit("node-ttl", "operator", 3);
    const entry = await store.read({ site: "ttl", identity: "node-ttl" });
    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: TABLE }));

    expect(ttl.TimeToLiveDescription?.AttributeName).toBe(ADMISSION_TTL_ATTRIBUTE);
    expect(entry).toMatchObject({ term: 3, state: "queued", source: "operator", admittedAt: work?.admittedAt });
    expect(entry!.expiresAt).toBeGreaterThan(work!.admittedAt + 2 * 60_000);
  });

  it("fails with a named error when the store is unreachable", async () => {
    const unreachable = new DynamoDBClient({ ...LOCAL_AWS, endpoint: `http://127.0.0.1:${await freePort()}`, maxAttempts: 1 });
    const store = new DynamoDbAdmissionStore({ client: unreachable, tableName: TABLE });
    const registry = new AdmissionRegistry({ site: "down", intervalMs: 60_000 }, { store, metrics: new RecordingMetrics() });

    const error = await registry.admit("node-1", "discovery", 1).catch((caught: unknown) => caught);

    unreachable.destroy();
    expect(error).toBeInstanceOf(AdmissionStoreError);
  });
});
