/**
 * The operator CLI's AWS side: the DynamoDB and SQS clients for a deployment's stack, the check
 * that the tables and queues a command needs exist (naming where they were looked for), the
 * Operator built on the stack's stores and queues, and `registry merge` over the stack's admission
 * table and the tables it merges from. The stores and the DynamoDB reads themselves are in
 * lib/dynamodb; cli/cli.ts parses and prints.
 */
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from "@aws-sdk/client-sqs";
import { AdmissionRegistry } from "../admission/registry";
import { messageOf, StackNotFoundError } from "../errors";
import { IssuanceOperator } from "../app/operator/issuance-operator";
import { RenewalOperator } from "../app/operator/renewal-operator";
import { Operator } from "../app/operator/site-operator";
import { RegistryMerge, RegistryMergeError } from "../app/registry-merge";
import { DynamoDbAdmissionStore } from "../dynamodb/admission-store";
import { createDynamoDbClient, type AttributeValue, type DynamoDBClient } from "../dynamodb/client";
import { DynamoDbIssuanceLedger } from "../dynamodb/issuance-ledger";
import { DynamoDbLeaseStore } from "../dynamodb/lease-store";
import { expiredAdmissionEntries, tableArn } from "../dynamodb/operator-reads";
import { DynamoDbPauseStore } from "../dynamodb/pause-store";
import { DynamoDbRegistryTable } from "../dynamodb/registry-copy";
import { DynamoDbRenewalStore } from "../dynamodb/renewal-store";
import type { Clock } from "../ports/clock";
import type { Metrics } from "../ports/metrics";
import { createStoreClient, endpointConfig } from "./clients";
import { tableArnRegion } from "./settings";
import { SqsDeadLetterQueue } from "./sqs-dead-letters";
import { SqsMessageQueue } from "./sqs-queue";

type QueueName = "hostWork" | "hostWorkDlq" | "lifecycle" | "lifecycleDlq";

/** What one operator command reads and writes. */
export interface StackNeeds {
  tables: Array<"lease" | "admission">;
  queues: QueueName[];
}

/** Where a deployment's resources are, as the CLI resolved them from flags, environment and stage. */
export interface OperatorStack {
  stage: string;
  site: string;
  deploymentId: string;
  region: string;
  leaseTable: string;
  admissionTable: string;
  /** Queue URLs or names. */
  queues: Record<QueueName, string>;
  dynamoDbEndpoint: string | undefined;
  sqsEndpoint: string | undefined;
  /** The deployment's lease.skew_bound and rpc_ttl, when its configuration was given. */
  timing?: { skewBoundMs: number; deliveryHorizonMs: number };
  /** The deployment's renew settings, when its configuration was given: status says whether renewal keeps up. */
  renew?: { before: { ms: number } | { fraction: number }; ratePerMinute: number; maxInFlight: number; timeoutMs: number };
  /** The deployment's provisioning_jwt_warning, when its configuration sets it: status forecasts the provisioning JWTs over it. */
  provisioningJwtWarningMs?: number;
}

const noMetrics: Metrics = { gauge: () => undefined, count: () => undefined, timing: () => undefined };

/** The Operator on the deployment's stack, once what `needs` names is found; `close` releases the clients. */
export async function openOperator(
  stack: OperatorStack,
  needs: StackNeeds,
  clock: Clock,
): Promise<{ operator: Operator; renewal: RenewalOperator; issuance: IssuanceOperator; registryMerge: OpenRegistryMerge; close(): void }> {
  // One retry against a local emulator: a refused connection is reported at once.
  const local = (region: string, endpoint: string | undefined) => ({ ...endpointConfig(region, endpoint), ...(endpoint ? { maxAttempts: 2 } : {}) });
  // A site table another deployment owns may be named by ARN in another Region: its client goes there.
  const tables = new RegionalClients((region) => createDynamoDbClient(local(region, stack.dynamoDbEndpoint)), stack.region);
  const sqs = new SQSClient(local(stack.region, stack.sqsEndpoint));
  const mergeClients: DynamoDBClient[] = [];
  const close = () => {
    tables.destroy();
    sqs.destroy();
    for (const client of mergeClients) client.destroy();
  };
  const dynamo = tables.for(stack.admissionTable);
  try {
    await checkTables(tables, stack, needs.tables);
    const urls = await resolveQueues(sqs, stack, needs.queues);
    const store = new DynamoDbAdmissionStore({ client: dynamo, tableName: stack.admissionTable });
    const registry = new AdmissionRegistry(
      // The interval only shapes admissions the operator makes, which override it anyway.
      { site: stack.site, intervalMs: 60_000, ...(stack.provisioningJwtWarningMs === undefined ? {} : { provisioningJwtWarningMs: stack.provisioningJwtWarningMs }) },
      { store, metrics: noMetrics, clock },
    );
    const queue = (url: string | undefined) => new SqsMessageQueue({ client: sqs, url: url ?? "" });
    const renewalStore = new DynamoDbRenewalStore({ client: dynamo, tableName: stack.admissionTable });
    const operator = new Operator({
      site: stack.site,
      deploymentId: stack.deploymentId,
      lease: new DynamoDbLeaseStore({ client: tables.for(stack.leaseTable), tableName: stack.leaseTable }),
      pause: new DynamoDbPauseStore({ client: tables.for(stack.leaseTable), tableName: stack.leaseTable }),
      registry,
      renewalStore,
      queues: {
        hostWork: queue(urls.hostWork),
        hostWorkDlq: new SqsDeadLetterQueue({ client: sqs, url: urls.hostWorkDlq ?? "" }),
        lifecycle: queue(urls.lifecycle),
        lifecycleDlq: queue(urls.lifecycleDlq),
      },
      clock,
      expiredEntries: (now) => expiredAdmissionEntries(dynamo, stack.admissionTable, stack.site, now),
      ...(stack.timing ? { timing: stack.timing } : {}),
      ...(stack.renew ? { renew: stack.renew } : {}),
    });
    const renewal = new RenewalOperator({ site: stack.site, operator, registry, store: renewalStore, clock });
    const issuance = new IssuanceOperator({ site: stack.site, ledger: new DynamoDbIssuanceLedger({ client: dynamo, tableName: stack.admissionTable }), entries: store, clock });
    return { operator, renewal, issuance, registryMerge: (sources) => openRegistryMerge(stack, sources, clock, mergeClients), close };
  } catch (error) {
    close();
    throw error;
  }
}

/** `registry merge` from the tables named by `--from` into the stack's admission table. */
type OpenRegistryMerge = (sources: readonly string[]) => Promise<RegistryMerge<AttributeValue>>;

/**
 * The merge's tables, each found (a missing one is named with the flag that gives it) and none the
 * target itself under another name. Its clients time out like the functions' registry client, so
 * a stalled path fails a write, which is then read back, rather than hang; a table given by ARN is
 * reached in the ARN's Region. The clients are added to `clients` for the caller to close.
 */
async function openRegistryMerge(stack: OperatorStack, sources: readonly string[], clock: Clock, clients: DynamoDBClient[]): Promise<RegistryMerge<AttributeValue>> {
  const regional = new RegionalClients((region) => {
    const client = createStoreClient(endpointConfig(region, stack.dynamoDbEndpoint));
    clients.push(client);
    return client;
  }, stack.region);
  const clientFor = (table: string) => regional.for(table);
  const arnOf = async (table: string, what: string, fix: string) => {
    try {
      return (await tableArn(clientFor(table), table)) ?? table;
    } catch (error) {
      if (errorName(error) !== "ResourceNotFoundException") throw error;
      const region = tableArnRegion(table) ?? stack.region;
      throw new StackNotFoundError(`the ${what} "${table}" does not exist ${where({ ...stack, region }, stack.dynamoDbEndpoint)}${fix}`, { cause: error });
    }
  };
  // Checked here, not by openOperator: a target given by ARN may be in another Region than the stack's.
  const targetArn = await arnOf(
    stack.admissionTable,
    "admission table",
    ` (stage "${stack.stage}"): deploy the stack, or pass --stage, --admission-table or ADMISSION_TABLE`,
  );
  for (const source of sources) {
    if ((await arnOf(source, "table", ": check --from (a table name in this Region, or a table ARN)")) === targetArn) {
      throw new RegistryMergeError(`--from ${source} is the target itself, the admission table ${stack.admissionTable}: name the other deployments' tables`);
    }
  }
  return new RegistryMerge({
    site: stack.site,
    target: new DynamoDbRegistryTable(clientFor(stack.admissionTable), stack.admissionTable),
    sources: sources.map((source) => new DynamoDbRegistryTable(clientFor(source), source)),
    clock,
  });
}

function where(stack: OperatorStack, endpoint: string | undefined): string {
  return endpoint ? `at ${endpoint}` : `in region ${stack.region}`;
}

/** One DynamoDB client per Region: the stack's own, and that of each table named by an ARN elsewhere. */
class RegionalClients {
  private readonly clients = new Map<string, DynamoDBClient>();
  constructor(
    private readonly create: (region: string) => DynamoDBClient,
    private readonly home: string,
  ) {}

  for(table: string): DynamoDBClient {
    const region = tableArnRegion(table) ?? this.home;
    let client = this.clients.get(region);
    if (!client) {
      client = this.create(region);
      this.clients.set(region, client);
    }
    return client;
  }

  destroy(): void {
    for (const client of this.clients.values()) client.destroy();
  }
}

async function checkTables(clients: RegionalClients, stack: OperatorStack, tables: StackNeeds["tables"]): Promise<void> {
  for (const table of tables) {
    const name = table === "lease" ? stack.leaseTable : stack.admissionTable;
    try {
      await tableArn(clients.for(name), name);
    } catch (error) {
      if (errorName(error) !== "ResourceNotFoundException") throw error;
      throw new StackNotFoundError(
        `the ${table} table "${name}" does not exist ${where(stack, stack.dynamoDbEndpoint)} ` +
          `(stage "${stack.stage}"): deploy the stack, or pass --stage, --${table}-table or ${table === "lease" ? "LEASE_TABLE" : "ADMISSION_TABLE"}`,
        { cause: error },
      );
    }
  }
}

const QUEUE_FLAGS = {
  hostWork: ["host-work-queue", "HOST_WORK_QUEUE_URL"],
  hostWorkDlq: ["host-work-dlq", "HOST_WORK_DLQ_URL"],
  lifecycle: ["lifecycle-queue", "LIFECYCLE_QUEUE_URL"],
  lifecycleDlq: ["lifecycle-dlq", "LIFECYCLE_DLQ_URL"],
} as const;

async function resolveQueues(sqs: SQSClient, stack: OperatorStack, queues: StackNeeds["queues"]): Promise<Partial<Record<QueueName, string>>> {
  const urls: Partial<Record<QueueName, string>> = {};
  for (const queue of queues) {
    const given = stack.queues[queue];
    try {
      if (/^https?:\/\//.test(given)) {
        await sqs.send(new GetQueueAttributesCommand({ QueueUrl: given, AttributeNames: ["QueueArn"] }));
        urls[queue] = given;
      } else {
        urls[queue] = (await sqs.send(new GetQueueUrlCommand({ QueueName: given }))).QueueUrl;
      }
    } catch (error) {
      if (!/QueueDoesNotExist|NonExistentQueue/.test(`${errorName(error)} ${messageOf(error)}`)) throw error;
      const [flag, variable] = QUEUE_FLAGS[queue];
      throw new StackNotFoundError(
        `the queue "${given}" does not exist ${where(stack, stack.sqsEndpoint)} (stage "${stack.stage}"): deploy the stack, or pass --stage, --${flag} or ${variable}`,
        { cause: error },
      );
    }
  }
  return urls;
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : "";
}

/** An AWS failure in the operator's words: credentials, access, an unreachable endpoint, else the SDK's message. */
export function describeAwsError(error: unknown): string {
  const name = errorName(error);
  if (/CredentialsProviderError|ExpiredToken|UnrecognizedClient|InvalidSignature/.test(name)) {
    return `AWS refused the credentials (${name}): set AWS_PROFILE or credentials for the deployment's account`;
  }
  if (/AccessDenied/.test(name)) return `AWS denied access: ${messageOf(error)}`;
  if (/ECONNREFUSED|ENOTFOUND|fetch failed/.test(`${messageOf(error)} ${String((error as { cause?: unknown })?.cause ?? "")}`)) {
    return `could not reach the endpoint: ${messageOf(error)}`;
  }
  return messageOf(error);
}
