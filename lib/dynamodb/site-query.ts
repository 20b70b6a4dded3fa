/**
 * One site's items of a table keyed by `site` (the admission table), read with Query page after
 * page: the named attributes only (whole items when none are named), and, with a filter, only the
 * items it keeps (DynamoDB still reads the others, and pages by what it read). The one Query loop
 * of the admission store's listing, the registry copy, the operator's reads and the local view.
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";

export interface SiteQuery {
  tableName: string;
  site: string;
  /** The attributes each item is read with (ProjectionExpression); the whole item when left out. */
  attributes?: readonly string[];
  /** A strongly consistent read (the registry copy compares what it read with what it writes). */
  consistent?: boolean;
  /** A FilterExpression over `#name` and `:value` placeholders, with their maps. */
  filter?: { expression: string; names: Record<string, string>; values: Record<string, AttributeValue> };
}

/** Every item of `query.site` the query keeps, with the attributes it names. */
export async function querySite(client: DynamoDBClient, query: SiteQuery): Promise<Array<Record<string, AttributeValue>>> {
  const items: Array<Record<string, AttributeValue>> = [];
  const attributes = query.attributes ?? [];
  let startKey: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: query.tableName,
        KeyConditionExpression: "#site = :site",
        ...(query.filter ? { FilterExpression: query.filter.expression } : {}),
        ...(attributes.length > 0 ? { ProjectionExpression: attributes.map((attribute) => `#${attribute}`).join(", ") } : {}),
        ExpressionAttributeNames: {
          "#site": "site",
          ...Object.fromEntries(attributes.map((attribute) => [`#${attribute}`, attribute])),
          ...query.filter?.names,
        },
        ExpressionAttributeValues: { ":site": { S: query.site }, ...query.filter?.values },
        ...(query.consistent ? { ConsistentRead: true } : {}),
        ExclusiveStartKey: startKey,
      }),
    );
    items.push(...(page.Items ?? []));
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return items;
}
