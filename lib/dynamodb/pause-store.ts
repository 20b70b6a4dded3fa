/** The pause switches as items of the lease table (lib/lease/pause.ts says what a switch is). */
import { GetItemCommand, PutItemCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import * as z from "zod";
import { readItem, writeExpressions } from "./expression";
import { PAUSE_KEY_PREFIX, pauseKey } from "../lease/pause";
import type { PauseState, PauseStore } from "../ports/pause-store";

/** A pause switch item; `site` is its key in the lease table, `pausedSite` the site it pauses. */
const PAUSE_ITEM = z
  .object({
    pausedSite: z.string().min(1),
    deploymentId: z.string().min(1),
    paused: z.boolean(),
    changedAt: z.number().catch(0).default(0),
    by: z.string().optional().catch(undefined),
    reason: z.string().optional().catch(undefined),
  })
  .transform(({ pausedSite, deploymentId, paused, changedAt, by, reason }): PauseState => {
    const state: PauseState = { site: pausedSite, deploymentId, paused, changedAt };
    if (by) state.by = by;
    if (reason) state.reason = reason;
    return state;
  });

export class DynamoDbPauseStore implements PauseStore {
  constructor(private readonly options: { client: DynamoDBClient; tableName: string }) {}

  async read(site: string, deploymentId: string): Promise<PauseState | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: { site: { S: pauseKey(site, deploymentId) } }, ConsistentRead: true }),
    );
    return decode(Item);
  }

  async write(state: PauseState): Promise<void> {
    const item = {
      site: pauseKey(state.site, state.deploymentId),
      pausedSite: state.site,
      deploymentId: state.deploymentId,
      paused: state.paused,
      changedAt: state.changedAt,
      by: state.by || undefined,
      reason: state.reason || undefined,
    };
    await this.options.client.send(new PutItemCommand({ TableName: this.options.tableName, Item: marshall(item, { removeUndefinedValues: true }) }));
  }

  async list(site: string): Promise<PauseState[]> {
    const states: PauseState[] = [];
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      // The lease table holds one item per site plus these switches: a scan reads a handful of items.
      const page = await this.options.client.send(
        new ScanCommand({
          TableName: this.options.tableName,
          ...filterOf(writeExpressions({ condition: "begins_with(#site, :prefix)", conditionValues: { prefix: `${PAUSE_KEY_PREFIX}${encodeURIComponent(site)}#` } })),
          ConsistentRead: true,
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of page.Items ?? []) {
        const state = decode(item);
        if (state) states.push(state);
      }
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return states.sort((a, b) => a.deploymentId.localeCompare(b.deploymentId));
  }
}

function decode(item: Record<string, AttributeValue> | undefined): PauseState | undefined {
  return readItem(PAUSE_ITEM, item);
}

/** A scan's filter is written as a condition is. */
function filterOf({ ConditionExpression, ExpressionAttributeNames, ExpressionAttributeValues }: ReturnType<typeof writeExpressions>) {
  return { FilterExpression: ConditionExpression, ExpressionAttributeNames, ExpressionAttributeValues };
}
