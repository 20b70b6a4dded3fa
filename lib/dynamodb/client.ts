/**
 * The DynamoDB client as lib/aws builds it: lib/aws/clients.ts chooses each client's timeouts,
 * attempts and endpoint, and creates it here, so the SDK package is imported only in lib/dynamodb.
 * The SDK's types the composition passes around (the client, its configuration, an attribute
 * value) are re-exported under their own names.
 */
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";

export type { AttributeValue, DynamoDBClient, DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";

/** A DynamoDB client with `config` as given (region, endpoint, credentials, attempts, request handler). */
export function createDynamoDbClient(config: DynamoDBClientConfig): DynamoDBClient {
  return new DynamoDBClient(config);
}
