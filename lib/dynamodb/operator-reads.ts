/**
 * The operator CLI's own reads of a deployment's tables (lib/aws/operator-stack.ts): whether a
 * table exists, and its ARN; the site's admission entries past their `expiresAt`.
 */
import { DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { querySite } from "./site-query";

/**
 * The table's ARN (undefined when the answer names none). A missing table throws the SDK's
 * ResourceNotFoundException, for the caller to name the flag that gives it.
 */
export async function tableArn(client: DynamoDBClient, tableName: string): Promise<string | undefined> {
  return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table?.TableArn;
}

/** The site's admission entries whose `expiresAt` is past (the TTL attribute may lag by days). */
export async function expiredAdmissionEntries(
  client: DynamoDBClient,
  tableName: string,
  site: string,
  now: number,
): Promise<Array<{ identity: string; state: string }>> {
  const items = await querySite(client, {
    tableName,
    site,
    attributes: ["identity", "state"],
    filter: { expression: "#expiresAt <= :now", names: { "#expiresAt": "expiresAt" }, values: { ":now": { N: String(now) } } },
  });
  return items.map((item) => ({ identity: item.identity?.S ?? "", state: item.state?.S ?? "queued" }));
}
