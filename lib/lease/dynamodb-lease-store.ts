/**
 * LeaseStore on a DynamoDB table keyed by `site` (one item per site). Every operation is one
 * UpdateItem with a condition; on a condition failure DynamoDB returns the stored item
 * (ReturnValuesOnConditionCheckFailure), so the caller learns who holds the lease without a read.
 * The item is never deleted, so the term survives releases and only ever increases.
 */
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  GetItemCommand,
  UpdateItemCommand,
  waitUntilTableExists,
  type AttributeValue,
  type DynamoDBClient,
  type UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { AnnounceRequest, ClaimRequest, ConditionalWrite, ExtendRequest, HolderBounds, LeaseItem, LeaseStore, PeerRequest, ReleaseRequest } from "./lease";

const NAMES = {
  "#site": "site",
  "#holder": "holder",
  "#term": "term",
  "#expiresAt": "expiresAt",
  "#announcedTerm": "announcedTerm",
  "#released": "released",
  "#skewBound": "skewBoundMs",
  "#horizon": "deliveryHorizonMs",
};

/**
 * Each deployment that took part is one top-level attribute `peers.<id>` (epoch ms): a nested map
 * would need to exist before a SET could add to it, and items written before it have none.
 */
const PEER_PREFIX = "peers.";

/** The SET clause and values that record a holder's bounds and presence (`#peer` names `peers.<holder>`). */
function boundsUpdate(bounds: HolderBounds): { set: string; values: Record<string, AttributeValue> } {
  return {
    set: "#skewBound = :skewBound, #horizon = :horizon, #peer = :seenAt",
    values: {
      ":skewBound": { N: String(bounds.skewBoundMs) },
      ":horizon": { N: String(bounds.deliveryHorizonMs) },
      ":seenAt": { N: String(bounds.seenAt) },
    },
  };
}

export interface DynamoDbLeaseStoreOptions {
  client: DynamoDBClient;
  tableName: string;
}

export class DynamoDbLeaseStore implements LeaseStore {
  constructor(private readonly options: DynamoDbLeaseStoreOptions) {}

  claim(request: ClaimRequest): Promise<ConditionalWrite> {
    const bounds = boundsUpdate(request);
    return this.update(
      request.site,
      {
        UpdateExpression: `SET #holder = :holder, #expiresAt = :expiresAt, ${bounds.set} REMOVE #released ADD #term :one`,
        ConditionExpression: "attribute_not_exists(#site) OR #expiresAt < :expiredBefore",
        ExpressionAttributeValues: {
          ":holder": { S: request.holder },
          ":expiresAt": { N: String(request.expiresAt) },
          ":expiredBefore": { N: String(request.expiredBefore) },
          ":one": { N: "1" },
          ...bounds.values,
        },
      },
      request.holder,
    );
  }

  extend(request: ExtendRequest): Promise<ConditionalWrite> {
    const values: Record<string, AttributeValue> = {
      ":holder": { S: request.holder },
      ":expiresAt": { N: String(request.expiresAt) },
    };
    let condition = "#holder = :holder AND #expiresAt < :expiresAt AND attribute_not_exists(#released)";
    if (request.term !== undefined) {
      condition += " AND #term = :term";
      values[":term"] = { N: String(request.term) };
    }
    const bounds = boundsUpdate(request);
    return this.update(
      request.site,
      {
        UpdateExpression: `SET #expiresAt = :expiresAt, ${bounds.set}`,
        ConditionExpression: condition,
        ExpressionAttributeValues: { ...values, ...bounds.values },
      },
      request.holder,
    );
  }

  async recordPeer(request: PeerRequest): Promise<void> {
    try {
      await this.options.client.send(
        new UpdateItemCommand({
          TableName: this.options.tableName,
          Key: { site: { S: request.site } },
          UpdateExpression: "SET #peer = :seenAt",
          ConditionExpression: "attribute_exists(#site)",
          ExpressionAttributeNames: { "#peer": `${PEER_PREFIX}${request.deployment}`, "#site": "site" },
          ExpressionAttributeValues: { ":seenAt": { N: String(request.seenAt) } },
        }),
      );
    } catch (error) {
      // No lease item yet: there is nothing to record presence in, and the next claim creates it.
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }

  release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.update(request.site, {
      UpdateExpression: "SET #released = :released",
      ConditionExpression: "#holder = :holder AND #term = :term",
      ExpressionAttributeValues: { ":holder": { S: request.holder }, ":term": { N: String(request.term) }, ":released": { BOOL: true } },
    });
  }

  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.update(request.site, {
      UpdateExpression: "SET #announcedTerm = :term",
      ConditionExpression: "#holder = :holder AND #term = :term AND (attribute_not_exists(#announcedTerm) OR #announcedTerm < :term)",
      ExpressionAttributeValues: { ":holder": { S: request.holder }, ":term": { N: String(request.term) } },
    });
  }

  async read(site: string): Promise<LeaseItem | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: { site: { S: site } }, ConsistentRead: true }),
    );
    return decodeLeaseItem(Item);
  }

  /** `peer`: the deployment whose `peers.<id>` attribute `#peer` names, for writes that record one. */
  private async update(
    site: string,
    input: Pick<UpdateItemCommandInput, "UpdateExpression" | "ConditionExpression" | "ExpressionAttributeValues">,
    peer?: string,
  ): Promise<ConditionalWrite> {
    const names: Record<string, string> = Object.fromEntries(
      Object.entries(NAMES).filter(([placeholder]) => `${input.UpdateExpression} ${input.ConditionExpression}`.includes(placeholder)),
    );
    if (peer !== undefined) names["#peer"] = `${PEER_PREFIX}${peer}`;
    try {
      const { Attributes } = await this.options.client.send(
        new UpdateItemCommand({
          ...input,
          TableName: this.options.tableName,
          Key: { site: { S: site } },
          ExpressionAttributeNames: names,
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      const item = decodeLeaseItem(Attributes);
      if (!item) throw new Error(`DynamoDB returned no lease item for site ${site} after an applied update`);
      return { applied: true, item };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { applied: false, current: decodeLeaseItem(error.Item) };
      throw error;
    }
  }
}

function decodeLeaseItem(item: Record<string, AttributeValue> | undefined): LeaseItem | undefined {
  if (!item?.site?.S || item.holder?.S === undefined || !item.term?.N || !item.expiresAt?.N) return undefined;
  const decoded: LeaseItem = { site: item.site.S, holder: item.holder.S, term: Number(item.term.N), expiresAt: Number(item.expiresAt.N) };
  if (item.announcedTerm?.N) decoded.announcedTerm = Number(item.announcedTerm.N);
  if (item.released?.BOOL) decoded.released = true;
  if (item.skewBoundMs?.N) decoded.skewBoundMs = Number(item.skewBoundMs.N);
  if (item.deliveryHorizonMs?.N) decoded.deliveryHorizonMs = Number(item.deliveryHorizonMs.N);
  const peers = Object.entries(item).filter(([name, value]) => name.startsWith(PEER_PREFIX) && value.N !== undefined);
  if (peers.length > 0) decoded.peers = Object.fromEntries(peers.map(([name, value]) => [name.slice(PEER_PREFIX.length), Number(value.N)]));
  return decoded;
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

export async function waitUntilActive(client: DynamoDBClient, tableName: string): Promise<void> {
  await waitUntilTableExists({ client, maxWaitTime: 60, minDelay: 1, maxDelay: 2 }, { TableName: tableName });
}
