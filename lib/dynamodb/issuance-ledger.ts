/**
 * The issuance ledger (lib/ports/issuance-ledger.ts) in the site's admission table, so every
 * deployment of the site, and a failover, keeps one history. Each identity's records are a
 * partition of their own, `ledger#<site>#<identity>`, keyed by the credential's id, so the site's
 * host listing never reads them, `history` is one Query, and a record written again after a lost
 * answer lands on itself. The sparse index `ledger-by-day` (hash `ledgerDay` = `<site>#<UTC day>`,
 * range `issuedAt`) holds only these records: `issued --since 30d` reads 31 day partitions of it,
 * never the table. `ttl` lets DynamoDB delete a record after `ledger_retention`.
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import * as z from "zod";
import type { Issuance, IssuanceLedger } from "../ports/issuance-ledger";
import { messageOf, ProvisionerError } from "../errors";
import { readItem } from "./expression";
import { DynamoDbDirectWrites } from "./direct-writes";

/** The admission table has no `ledger-by-day` index: a site table created before the ledger, not yet updated. */
class LedgerIndexMissingError extends ProvisionerError {}

/**
 * The admission table's index of ledger records by day, as config/deployment.cjs (the stack) and
 * dev/local/resources.ts (the local and test tables) create it; test/deploy/template.test.ts holds
 * the stack's to these names, and the ledger's integration test queries the local one by them.
 */
const LEDGER_INDEX = "ledger-by-day";
const LEDGER_DAY_ATTRIBUTE = "ledgerDay";
const LEDGER_TIME_ATTRIBUTE = "issuedAt";
const DAY_MS = 86_400_000;
/** Day partitions read at once by issuedBetween. */
const DAYS_AT_ONCE = 8;

export interface DynamoDbIssuanceLedgerOptions {
  client: DynamoDBClient;
  /** The admission table (ADMISSION_TABLE). */
  tableName: string;
}

const partitionOf = (site: string, identity: string) => `ledger#${site}#${identity}`;
const dayOf = (site: string, at: number) => `${site}#${new Date(at).toISOString().slice(0, 10)}`;

const CERTIFICATE = z.object({ serial: z.string(), sha256: z.string(), issuer: z.string(), subject: z.string(), notAfter: z.number(), keySha256: z.string() });
const SERVER_JWT = z.object({ jti: z.string(), expiresAt: z.number(), issuer: z.string(), keySha256: z.string() });
/** A stored record; one of another shape (written by a later version, or by hand) is left out of the answers. */
const RECORD = z.object({
  host: z.string(),
  credentialId: z.string(),
  issuedAt: z.number(),
  kind: z.enum(["provision", "renewal"]),
  term: z.number(),
  deploymentId: z.string(),
  siteName: z.string(),
  expiresAt: z.number(),
  verdictSha256: z.string(),
  certificate: CERTIFICATE.optional(),
  serverJwt: SERVER_JWT.optional(),
});

function issuanceOf(item: Record<string, AttributeValue>): Issuance[] {
  const record = readItem(RECORD, item);
  if (!record) return [];
  const { host, siteName, ...rest } = record;
  return [{ ...rest, identity: host, site: siteName }];
}

const oldestFirst = (a: Issuance, b: Issuance) => a.issuedAt - b.issuedAt || (a.credentialId < b.credentialId ? -1 : 1);

export class DynamoDbIssuanceLedger implements IssuanceLedger {
  /** One record per credential issued: the Put skips the SDK's per-call pipeline, as the registry's writes do. */
  private readonly writes: DynamoDbDirectWrites;

  constructor(private readonly options: DynamoDbIssuanceLedgerOptions) {
    this.writes = new DynamoDbDirectWrites(options.client);
  }

  /** An unconditional Put: the key is the identity and the credential's id, and the content that credential's, so a second write of it is the first. */
  async record(issuance: Issuance): Promise<void> {
    const { site, identity, ...fields } = issuance;
    const item = {
      ...fields,
      site: partitionOf(site, identity),
      identity: issuance.credentialId,
      host: identity,
      siteName: site,
      [LEDGER_DAY_ATTRIBUTE]: dayOf(site, issuance.issuedAt),
      ttl: Math.ceil(issuance.expiresAt / 1000),
    };
    await this.writes.putItem({ TableName: this.options.tableName, Item: marshall(item, { removeUndefinedValues: true }) });
  }

  async history(site: string, identity: string): Promise<Issuance[]> {
    const items = await this.query({
      KeyConditionExpression: "#site = :partition",
      ExpressionAttributeNames: { "#site": "site" },
      ExpressionAttributeValues: { ":partition": { S: partitionOf(site, identity) } },
      ConsistentRead: true,
    });
    return items.flatMap(issuanceOf).sort(oldestFirst);
  }

  async issuedBetween(site: string, since: number, until: number): Promise<Issuance[]> {
    const days: string[] = [];
    for (let day = Math.floor(since / DAY_MS) * DAY_MS; day <= until; day += DAY_MS) days.push(dayOf(site, day));
    const items: Array<Record<string, AttributeValue>> = [];
    for (let first = 0; first < days.length; first += DAYS_AT_ONCE) {
      const pages = await Promise.all(days.slice(first, first + DAYS_AT_ONCE).map((day) => this.dayQuery(day, since, until)));
      items.push(...pages.flat());
    }
    return items.flatMap(issuanceOf).sort(oldestFirst);
  }

  private async dayQuery(day: string, since: number, until: number): Promise<Array<Record<string, AttributeValue>>> {
    try {
      return await this.dayItems(day, since, until);
    } catch (error) {
      if (!(error instanceof Error && error.name === "ValidationException" && /index/i.test(error.message))) throw error;
      throw new LedgerIndexMissingError(
        `the admission table ${this.options.tableName} has no ${LEDGER_INDEX} index (${messageOf(error)}): deploy the stack that owns the site's admission table again to add it`,
        { cause: error },
      );
    }
  }

  private dayItems(day: string, since: number, until: number): Promise<Array<Record<string, AttributeValue>>> {
    return this.query({
      IndexName: LEDGER_INDEX,
      KeyConditionExpression: "#day = :day AND #issuedAt BETWEEN :since AND :until",
      ExpressionAttributeNames: { "#day": LEDGER_DAY_ATTRIBUTE, "#issuedAt": LEDGER_TIME_ATTRIBUTE },
      ExpressionAttributeValues: { ":day": { S: day }, ":since": { N: String(since) }, ":until": { N: String(until) } },
    });
  }

  /** Every item the query keeps, page after page. */
  private async query(input: Omit<ConstructorParameters<typeof QueryCommand>[0], "TableName" | "ExclusiveStartKey">): Promise<Array<Record<string, AttributeValue>>> {
    const items: Array<Record<string, AttributeValue>> = [];
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.options.client.send(new QueryCommand({ ...input, TableName: this.options.tableName, ExclusiveStartKey: startKey }));
      items.push(...(page.Items ?? []));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return items;
  }
}
