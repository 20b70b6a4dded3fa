/**
 * The renewal state (lib/app/renewal-state.ts) as one item of the admission table, in a partition of
 * its own (`renewal#<site>`), so the site's host listing never reads it and renewal needs no table
 * of its own. The state is JSON in `state`; `version` makes each write conditional on the one read.
 */
import { ConditionalCheckFailedException, GetItemCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { emptyRenewalState, renewalStateFrom } from "../app/renewal-state";
import { type RenewalState, type RenewalStore, type StoredRenewalState } from "../app/use-case-ports";
import { RenewalStoreError } from "../errors";

export interface DynamoDbRenewalStoreOptions {
  client: DynamoDBClient;
  /** The admission table (ADMISSION_TABLE). */
  tableName: string;
}

const STATE_IDENTITY = "renewal-state";

export class DynamoDbRenewalStore implements RenewalStore {
  constructor(private readonly options: DynamoDbRenewalStoreOptions) {}

  async read(site: string): Promise<StoredRenewalState> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: this.key(site), ConsistentRead: true }),
    );
    if (!Item?.state?.S || !Item.version?.N) return { state: emptyRenewalState(), version: 0 };
    let state: RenewalState;
    try {
      state = renewalStateFrom(JSON.parse(Item.state.S) as Record<string, unknown>);
    } catch (error) {
      throw new RenewalStoreError(`the renewal state of site ${site} in table ${this.options.tableName} is not JSON`, { cause: error });
    }
    return { state, version: Number(Item.version.N) };
  }

  async write(site: string, state: RenewalState, version: number): Promise<boolean> {
    try {
      await this.options.client.send(
        new PutItemCommand({
          TableName: this.options.tableName,
          Item: { ...this.key(site), state: { S: JSON.stringify(state) }, version: { N: String(version + 1) } },
          ConditionExpression: version === 0 ? "attribute_not_exists(#version)" : "#version = :version",
          ExpressionAttributeNames: { "#version": "version" },
          ...(version === 0 ? {} : { ExpressionAttributeValues: { ":version": { N: String(version) } } }),
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  private key(site: string) {
    return { site: { S: `renewal#${site}` }, identity: { S: STATE_IDENTITY } };
  }
}
