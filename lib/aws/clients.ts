/**
 * The AWS SDK clients the functions and the operator CLI use, with the timeouts each needs: the
 * lease table's client fails fast (a hung store must close the gate quickly, docs/lease.md), the
 * admission store and queues get a bound that keeps every call inside the invocation. A local emulator endpoint gets static credentials.
 * The DynamoDB clients are created by lib/dynamodb/client.ts with the settings chosen here.
 */
import { SQSClient, type SQSClientConfig } from "@aws-sdk/client-sqs";
import { createDynamoDbClient, type DynamoDBClient, type DynamoDBClientConfig } from "../dynamodb/client";

/** Static credentials for local emulators (DYNAMODB_ENDPOINT / SQS_ENDPOINT); not secrets, never sent to AWS. */
const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" } as const;
/** A hung lease store must close the gate quickly rather than stall an attempt (docs/lease.md). */
const LEASE_REQUEST_TIMEOUT_MS = 1_500;
/**
 * The admission table and the queues: a DynamoDB or SQS answer takes milliseconds, so 3 s is a
 * stalled path, not a slow success (2 s timed out DynamoDB Local's first answers on a machine at
 * load 23, which only added retried writes). Two attempts keep one blip from
 * failing a call; a write whose first attempt landed is recognised by the registry (its retry
 * fails the condition on our own effect), and a queue message sent twice is deduplicated by the
 * claim. Against a stalled path a call fails within STORE_CLIENT_FAILS_WITHIN_MS, an admission
 * (write, then the read that settles it) within twice that: inside the 30 s of `discover`.
 */
const STORE_REQUEST_TIMEOUT_MS = 3_000;
const STORE_MAX_ATTEMPTS = 2;
/** The SDK's backoff between attempts is a random part of 100 ms x 2^attempt; this covers it. */
const RETRY_BACKOFF_ALLOWANCE_MS = 500;
/** The longest one admission-store or queue call takes to fail on a stalled path (the queues' clients share the store timeouts). */
export const STORE_CLIENT_FAILS_WITHIN_MS = STORE_MAX_ATTEMPTS * STORE_REQUEST_TIMEOUT_MS + RETRY_BACKOFF_ALLOWANCE_MS;
const DEFAULT_REGION = "us-east-1";

/** Region and, for a local emulator, its endpoint and static credentials; nothing set means the SDK's defaults. */
export function endpointConfig(region: string | undefined, endpoint: string | undefined): { region?: string; endpoint?: string; credentials?: typeof LOCAL_CREDENTIALS } {
  if (endpoint) return { region: region ?? DEFAULT_REGION, endpoint, credentials: LOCAL_CREDENTIALS };
  return region ? { region } : {};
}

/** The lease table's client: a hung store must close the gate quickly (docs/lease.md). */
export function createLeaseClient(config: DynamoDBClientConfig): DynamoDBClient {
  return createDynamoDbClient({
    ...config,
    maxAttempts: 2,
    // Without throwOnRequestTimeout the pinned SDK only logs a warning when requestTimeout passes.
    requestHandler: { requestTimeout: LEASE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

/** The admission registry's client. */
export function createStoreClient(config: DynamoDBClientConfig): DynamoDBClient {
  return createDynamoDbClient({
    ...config,
    maxAttempts: STORE_MAX_ATTEMPTS,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

/**
 * The queues' client. It does not compute an MD5 of every message body sent and received: the
 * queues are reached over TLS, which already rejects a damaged message, and each host's work is
 * a parsed, validated message (a damaged one is refused by name, never acted on).
 */
export function createSqsClient(config: SQSClientConfig): SQSClient {
  return new SQSClient({
    ...config,
    md5: false,
    maxAttempts: STORE_MAX_ATTEMPTS,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

