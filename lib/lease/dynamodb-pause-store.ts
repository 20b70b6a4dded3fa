/** The pause switches as items of the lease table (lib/lease/pause.ts says what a switch is). */
import { GetItemCommand, PutItemCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { PAUSE_KEY_PREFIX, pauseKey, type PauseState, type PauseStore } from "./pause";

export class DynamoDbPauseStore implements PauseStore {
  constructor(private readonly options: { client: DynamoDBClient; tableName: string }) {}

  async read(site: string, deploymentId: string): Promise<PauseState | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: { site: { S: pauseKey(site, deploymentId) } }, ConsistentRead: true }),
    );
    return decode(Item);
  }

  async write(state: PauseState): Promise<void> {
    const item: Record<string, AttributeValue> = {
      site: { S: pauseKey(state.site, state.deploymentId) },
      pausedSite: { S: state.site },
      deploymentId: { S: state.deploymentId },
      paused: { BOOL: state.paused },
      changedAt: { N: String(state.changedAt) },
    };
    if (state.by) item.by = { S: state.by };
    if (state.reason) item.reason = { S: state.reason };
    await this.options.client.send(new PutItemCommand({ TableName: this.options.tableName, Item: item }));
  }

  async list(site: string): Promise<PauseState[]> {
    const states: PauseState[] = [];
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      // The lease table holds one item per site plus these switches: a scan reads a handful of items.
      const page = await this.options.client.send(
        new ScanCommand({
          TableName: this.options.tableName,
          FilterExpression: "begins_with(#site, :prefix)",
          ExpressionAttributeNames: { "#site": "site" },
          ExpressionAttributeValues: { ":prefix": { S: `${PAUSE_KEY_PREFIX}${encodeURIComponent(site)}#` } },
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
  if (!item?.pausedSite?.S || !item.deploymentId?.S || item.paused?.BOOL === undefined) return undefined;
  const state: PauseState = {
    site: item.pausedSite.S,
    deploymentId: item.deploymentId.S,
    paused: item.paused.BOOL,
    changedAt: Number(item.changedAt?.N ?? 0),
  };
  if (item.by?.S) state.by = item.by.S;
  if (item.reason?.S) state.reason = item.reason.S;
  return state;
}
