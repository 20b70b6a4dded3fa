/**
 * The operator's pause switch for one deployment (`choria-provisioner pause` / `resume`). A paused
 * deployment neither works nor contests the lease: its gate reads the switch before every lease
 * round and reads closed while it is on, so it stops renewing and its lease runs out; a standby then
 * takes over as after a crash. The switch is one item per deployment in the lease table, next to the
 * site's lease item, so every deployment of a site sees it wherever the table is replicated.
 */
import { GetItemCommand, PutItemCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";

export interface PauseState {
  site: string;
  deploymentId: string;
  paused: boolean;
  /** Who flipped the switch and why (free text from the operator). */
  by?: string;
  reason?: string;
  /** Wall-clock epoch ms of the change. */
  changedAt: number;
}

export interface PauseStore {
  read(site: string, deploymentId: string): Promise<PauseState | undefined>;
  write(state: PauseState): Promise<void>;
  /** Every deployment of `site` with a switch item (paused or resumed). */
  list(site: string): Promise<PauseState[]>;
}

const PREFIX = "pause#";

/** The lease-table key of a deployment's switch; a lease item's key is the bare site name. */
export function pauseKey(site: string, deploymentId: string): string {
  return `${PREFIX}${encodeURIComponent(site)}#${encodeURIComponent(deploymentId)}`;
}

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
          ExpressionAttributeValues: { ":prefix": { S: `${PREFIX}${encodeURIComponent(site)}#` } },
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

export class MemoryPauseStore implements PauseStore {
  private readonly states = new Map<string, PauseState>();

  async read(site: string, deploymentId: string): Promise<PauseState | undefined> {
    const state = this.states.get(pauseKey(site, deploymentId));
    return state && { ...state };
  }

  async write(state: PauseState): Promise<void> {
    this.states.set(pauseKey(state.site, state.deploymentId), { ...state });
  }

  async list(site: string): Promise<PauseState[]> {
    return [...this.states.values()].filter((state) => state.site === site).map((state) => ({ ...state }));
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
