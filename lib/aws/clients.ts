/**
 * The AWS SDK clients the functions and the operator CLI use, with the timeouts each needs: the
 * lease table's client fails fast (a hung store must close the gate quickly, docs/lease.md), the
 * other stores and queues get a longer bound. A local emulator endpoint gets static credentials.
 */
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";

/** Static credentials for local emulators (DYNAMODB_ENDPOINT / SQS_ENDPOINT); not secrets, never sent to AWS. */
const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" } as const;
/** A hung lease store must close the gate quickly rather than stall an attempt (docs/lease.md). */
const LEASE_REQUEST_TIMEOUT_MS = 1_500;
export const STORE_REQUEST_TIMEOUT_MS = 5_000;
const DEFAULT_REGION = "us-east-1";

/** Region and, for a local emulator, its endpoint and static credentials; nothing set means the SDK's defaults. */
export function endpointConfig(region: string | undefined, endpoint: string | undefined): { region?: string; endpoint?: string; credentials?: typeof LOCAL_CREDENTIALS } {
  if (endpoint) return { region: region ?? DEFAULT_REGION, endpoint, credentials: LOCAL_CREDENTIALS };
  return region ? { region } : {};
}

/** The lease table's client: a hung store must close the gate quickly (docs/lease.md). */
export function createLeaseClient(config: DynamoDBClientConfig): DynamoDBClient {
  return new DynamoDBClient({
    ...config,
    maxAttempts: 2,
    // Without throwOnRequestTimeout the pinned SDK only logs a warning when requestTimeout passes.
    requestHandler: { requestTimeout: LEASE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

/** The admission registry's client. */
export function createStoreClient(config: DynamoDBClientConfig): DynamoDBClient {
  return new DynamoDBClient({
    ...config,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

/** The queues' client. */
export function createSqsClient(config: SQSClientConfig): SQSClient {
  return new SQSClient({
    ...config,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

