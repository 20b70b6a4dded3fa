/**
 * The local run's view of the admission registry: each host's state and claim, read straight from
 * the table (as an operator would look at it), and what a run that is not moving waits for, in
 * words: "6 hosts claimed until 17:04:10, oldest admitted 3 m ago; 2 queued".
 */
import { DynamoDBClient, QueryCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";

export interface RegistryRow {
  identity: string;
  term: number;
  state: string;
  admittedAt?: number;
  claimedUntil?: number;
  heldUntil?: number;
  lastError?: string;
  failedStep?: string;
  failures?: number;
}

const FIELDS = ["identity", "term", "state", "admittedAt", "claimedUntil", "heldUntil", "lastError", "failedStep", "failures"] as const;

export function registryView(options: { endpoint: string; region: string; credentials: { accessKeyId: string; secretAccessKey: string }; table: string; site: string }) {
  const client = new DynamoDBClient({ endpoint: options.endpoint, region: options.region, credentials: options.credentials });
  return {
    async rows(): Promise<RegistryRow[]> {
      const rows: RegistryRow[] = [];
      let startKey: Record<string, AttributeValue> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: options.table,
            KeyConditionExpression: "#site = :site",
            ProjectionExpression: FIELDS.map((field) => `#${field}`).join(", "),
            ExpressionAttributeNames: { "#site": "site", ...Object.fromEntries(FIELDS.map((field) => [`#${field}`, field])) },
            ExpressionAttributeValues: { ":site": { S: options.site } },
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) rows.push(decode(item));
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return rows;
    },
    close: () => client.destroy(),
  };
}

function decode(item: Record<string, AttributeValue>): RegistryRow {
  const number = (name: string) => (item[name]?.N === undefined ? undefined : Number(item[name]?.N));
  const row: RegistryRow = { identity: item.identity?.S ?? "", term: number("term") ?? 0, state: item.state?.S ?? "queued" };
  for (const name of ["admittedAt", "claimedUntil", "heldUntil", "failures"] as const) {
    const value = number(name);
    if (value !== undefined) row[name] = value;
  }
  if (item.lastError?.S !== undefined) row.lastError = item.lastError.S;
  if (item.failedStep?.S !== undefined) row.failedStep = item.failedStep.S;
  return row;
}

const clock = (epochMs: number) => new Date(epochMs).toISOString().slice(11, 19);

function age(ms: number): string {
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} m`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** One host's registry entry as the summary shows it. */
export function describeRow(row: RegistryRow | undefined, now: number): string {
  if (!row) return "not in the registry";
  const parts = [`${row.state} (term ${row.term})`];
  if (row.claimedUntil !== undefined) parts.push(row.claimedUntil > now ? `claimed until ${clock(row.claimedUntil)}` : `claim ran out at ${clock(row.claimedUntil)}`);
  if (row.heldUntil !== undefined && row.heldUntil > now) parts.push(`held until ${clock(row.heldUntil)}`);
  if (row.admittedAt !== undefined) parts.push(`admitted ${age(now - row.admittedAt)} ago`);
  return parts.join(", ");
}

/**
 * What the hosts not yet provisioned wait for, grouped by what the registry says of them; the hosts
 * the registry does not know yet wait for discovery or their startup event.
 */
export function describeWait(unfinished: string[], rows: Map<string, RegistryRow>, now: number): string {
  const claimed: RegistryRow[] = [];
  const lapsed: RegistryRow[] = [];
  const groups = new Map<string, number>();
  let unknown = 0;
  for (const identity of unfinished) {
    const row = rows.get(identity);
    if (!row) unknown++;
    else if (row.claimedUntil !== undefined && row.claimedUntil > now) claimed.push(row);
    else if (row.claimedUntil !== undefined) lapsed.push(row);
    else {
      const group = row.lastError === undefined ? row.state : `${row.state} after a failure`;
      groups.set(group, (groups.get(group) ?? 0) + 1);
    }
  }
  const plural = (count: number) => `${count} host${count === 1 ? "" : "s"}`;
  const parts: string[] = [];
  if (claimed.length > 0) {
    const until = Math.max(...claimed.map((row) => row.claimedUntil as number));
    const admitted = claimed.map((row) => row.admittedAt).filter((at): at is number => at !== undefined);
    const oldest = admitted.length > 0 ? `, oldest admitted ${age(now - Math.min(...admitted))} ago` : "";
    parts.push(`${plural(claimed.length)} claimed until ${clock(until)}${oldest}`);
  }
  if (lapsed.length > 0) parts.push(`${plural(lapsed.length)} whose claim ran out at ${clock(Math.min(...lapsed.map((row) => row.claimedUntil as number)))} or later`);
  for (const [state, count] of groups) parts.push(`${plural(count)} ${state}`);
  if (unknown > 0) parts.push(`${plural(unknown)} not in the registry yet (waiting for discovery or a startup event)`);
  return parts.join("; ");
}
