/**
 * The AWS and broker resources a deployment expects, made on the local emulators (serverless.yml
 * makes them on AWS): the lease and admission tables, each SQS queue with its dead-letter queue, and
 * the broker's lifecycle stream.
 * Shared by the local stack, `scripts/local-services.ts` and the integration tests; the names come
 * from `stageResourceNames` (lib/aws/stage-resources.ts).
 */
import { CreateTableCommand, UpdateTimeToLiveCommand, waitUntilTableExists, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { connect } from "nats";
import { ADMISSION_TTL_ATTRIBUTE } from "../../lib/dynamodb/admission-store";
import { APP_DEFAULTS } from "../../lib/aws/settings";
import type { RunningSqs } from "./services";

export { stageResourceNames } from "../../lib/aws/stage-resources";

/** The stage `sls invoke local` uses by default (scripts/sls-local.sh). */
export const LOCAL_STAGE = "local";

export interface ProvisionerTables {
  lease: string;
  admission: string;
}

export async function createProvisionerTables(client: DynamoDBClient, tables: ProvisionerTables): Promise<void> {
  await Promise.all([createLeaseTable(client, tables.lease), createAdmissionTable(client, tables.admission)]);
}

/** Creates the lease table (on-demand) and waits until it is active; for tests, benchmarks and the local run. */
export async function createLeaseTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [{ AttributeName: "site", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "site", KeyType: "HASH" }],
    }),
  );
  await waitUntilActive(client, tableName);
}

/** Creates the admission table (on-demand, TTL on `ttl`, the issuance ledger's index by day) and waits until it is active; for tests and the local run. */
export async function createAdmissionTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "site", AttributeType: "S" },
        { AttributeName: "identity", AttributeType: "S" },
        { AttributeName: "ledgerDay", AttributeType: "S" },
        { AttributeName: "issuedAt", AttributeType: "N" },
      ],
      KeySchema: [
        { AttributeName: "site", KeyType: "HASH" },
        { AttributeName: "identity", KeyType: "RANGE" },
      ],
      // The issuance ledger's index by day (lib/dynamodb/issuance-ledger.ts), as config/deployment.cjs makes it.
      GlobalSecondaryIndexes: [
        {
          IndexName: "ledger-by-day",
          KeySchema: [
            { AttributeName: "ledgerDay", KeyType: "HASH" },
            { AttributeName: "issuedAt", KeyType: "RANGE" },
          ],
          Projection: { ProjectionType: "ALL" },
        },
      ],
    }),
  );
  await waitUntilActive(client, tableName);
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: ADMISSION_TTL_ATTRIBUTE, Enabled: true },
    }),
  );
}

async function waitUntilActive(client: DynamoDBClient, tableName: string): Promise<void> {
  await waitUntilTableExists({ client, maxWaitTime: 60, minDelay: 1, maxDelay: 2 }, { TableName: tableName });
}

export interface QueueWithDeadLetter {
  url: string;
  arn: string;
  deadLetterUrl: string;
}

/** `<name>` whose RedrivePolicy moves a message to `<name>-dlq` after `maxReceiveCount` receives. */
export function createQueueWithDeadLetter(
  sqs: RunningSqs,
  name: string,
  options: { maxReceiveCount: number; attributes?: Record<string, string>; deadLetterAttributes?: Record<string, string> },
): QueueWithDeadLetter {
  const deadLetter = sqs.createQueueWithArn(`${name}-dlq`, options.deadLetterAttributes);
  const queue = sqs.createQueueWithArn(name, {
    ...options.attributes,
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: deadLetter.arn, maxReceiveCount: options.maxReceiveCount }),
  });
  return { ...queue, deadLetterUrl: deadLetter.url };
}

/** The stream name the functions expect by default (LIFECYCLE_STREAM unset). */
export const LIFECYCLE_STREAM = APP_DEFAULTS.lifecycleStream;

/**
 * The broker's lifecycle stream (1 h retention), so events published before a bridge runs are kept.
 * `tls`: the broker requires TLS; `ca` is the PEM that signed its certificate.
 */
export async function createLifecycleStream(natsUrl: string, tls?: { ca: string }): Promise<void> {
  const nc = await connect({ servers: natsUrl, name: "local-setup", ...(tls ? { tls: { ca: tls.ca } } : {}) });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: LIFECYCLE_STREAM, subjects: ["choria.lifecycle.event.>"], max_age: 3_600_000_000_000 });
  } finally {
    await nc.close();
  }
}
