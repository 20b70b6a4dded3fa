/**
 * HostRecords on the admission table (see lib/admission/dynamodb-admission-store.ts for the item
 * layout). Every write is conditional on the exact admission or claim it acts on, so it can never
 * undo a newer admission or another worker's claim.
 */
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  QueryCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { HostClaim } from "../admission/registry";
import { systemClock, type Clock, type HostWork } from "../ports";
import type { HostRecords, RegistryState, RegistrySummary } from "./ports";

const LAST_ERRORS_SHOWN = 50;

export interface DynamoDbHostRecordsOptions {
  client: DynamoDBClient;
  tableName: string;
  site: string;
  clock?: Clock;
}

const n = (value: number): AttributeValue => ({ N: String(value) });
const s = (value: string): AttributeValue => ({ S: value });

export class DynamoDbHostRecords implements HostRecords {
  private readonly clock: Clock;

  constructor(private readonly options: DynamoDbHostRecordsOptions) {
    this.clock = options.clock ?? systemClock;
  }

  releaseClaim(claim: HostClaim, reason: string): Promise<boolean> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(claim.work.identity),
        UpdateExpression: "SET #state = :queued, #lastError = :reason, #lastErrorAt = :now REMOVE #claimToken, #claimedUntil",
        ConditionExpression: "#claimToken = :token",
        ExpressionAttributeNames: {
          "#state": "state",
          "#lastError": "lastError",
          "#lastErrorAt": "lastErrorAt",
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
        },
        ExpressionAttributeValues: {
          ":queued": s("queued"),
          ":reason": s(reason.slice(0, 1_000) || "unknown"),
          ":now": n(this.clock.now()),
          ":token": s(claim.token),
        },
      }),
    );
  }

  forgetQueued(work: HostWork): Promise<boolean> {
    return this.conditional(
      new DeleteItemCommand({
        TableName: this.options.tableName,
        Key: this.key(work.identity),
        ConditionExpression: "#term = :term AND #admittedAt = :admittedAt AND attribute_not_exists(#claimToken)",
        ExpressionAttributeNames: { "#term": "term", "#admittedAt": "admittedAt", "#claimToken": "claimToken" },
        ExpressionAttributeValues: { ":term": n(work.term), ":admittedAt": n(work.admittedAt) },
      }),
    );
  }

  forgetUnlessClaimed(identity: string): Promise<boolean> {
    return this.conditional(
      new DeleteItemCommand({
        TableName: this.options.tableName,
        Key: this.key(identity),
        ConditionExpression: "attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now",
        ExpressionAttributeNames: { "#claimedUntil": "claimedUntil" },
        ExpressionAttributeValues: { ":now": n(this.clock.now()) },
      }),
    );
  }

  async summary(): Promise<RegistrySummary> {
    const summary: RegistrySummary = { total: 0, byState: { queued: 0, provisioning: 0, provisioned: 0 }, lastErrors: [] };
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.options.client.send(
        new QueryCommand({
          TableName: this.options.tableName,
          KeyConditionExpression: "#site = :site",
          ProjectionExpression: "#identity, #term, #state, #lastError, #lastErrorAt",
          ExpressionAttributeNames: {
            "#site": "site",
            "#identity": "identity",
            "#term": "term",
            "#state": "state",
            "#lastError": "lastError",
            "#lastErrorAt": "lastErrorAt",
          },
          ExpressionAttributeValues: { ":site": s(this.options.site) },
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of page.Items ?? []) {
        summary.total++;
        const state = (item.state?.S ?? "queued") as RegistryState;
        if (state in summary.byState) summary.byState[state]++;
        if (item.lastError?.S && item.identity?.S) {
          summary.lastErrors.push({
            identity: item.identity.S,
            term: Number(item.term?.N ?? 0),
            lastError: item.lastError.S,
            lastErrorAt: Number(item.lastErrorAt?.N ?? 0),
          });
        }
      }
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    summary.lastErrors.sort((a, b) => b.lastErrorAt - a.lastErrorAt);
    summary.lastErrors.length = Math.min(summary.lastErrors.length, LAST_ERRORS_SHOWN);
    return summary;
  }

  private key(identity: string): Record<string, AttributeValue> {
    return { site: s(this.options.site), identity: s(identity) };
  }

  private async conditional(command: UpdateItemCommand | DeleteItemCommand): Promise<boolean> {
    try {
      // The union of command types does not narrow `send`'s overloads; each is a plain write.
      await this.options.client.send(command as UpdateItemCommand);
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}
