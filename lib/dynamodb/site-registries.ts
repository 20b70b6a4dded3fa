/**
 * Where the deployments of a site say which registry they use (lib/app/site-memory.ts):
 *
 * - the registry's id is an item of the admission table itself (`registry#<site>` / `id`), made by
 *   the first deployment that looks with a conditional put, so every deployment sharing the table
 *   reads the same id and deployments with different tables read different ones, whatever the
 *   tables' names, Regions or accounts;
 * - the reports are one item of the site's lease table (`registries#<site>`), one attribute a
 *   deployment, each written by its own deployment alone, so no report overwrites another.
 */
import { randomUUID } from "node:crypto";
import { ConditionalCheckFailedException, GetItemCommand, PutItemCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { RegistryReport, SiteRegistries } from "../app/use-case-ports";
import { SiteRegistriesError } from "../errors";

interface Table {
  client: DynamoDBClient;
  tableName: string;
}

const REPORT_PREFIX = "deployment:";

export class DynamoDbSiteRegistries implements SiteRegistries {
  private id: Promise<string> | undefined;

  constructor(private readonly options: { site: string; admission: Table; lease: Table }) {}

  ownId(): Promise<string> {
    // Kept once found; a failure is not kept, so the next check asks again.
    this.id ??= this.findOrMakeId().catch((error: unknown) => {
      this.id = undefined;
      throw error;
    });
    return this.id;
  }

  async report(report: RegistryReport): Promise<RegistryReport[]> {
    const { client, tableName } = this.options.lease;
    const { Attributes } = await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { site: { S: `registries#${this.options.site}` } },
        UpdateExpression: "SET #report = :report",
        ExpressionAttributeNames: { "#report": `${REPORT_PREFIX}${report.deploymentId}` },
        ExpressionAttributeValues: { ":report": { M: { registryId: { S: report.registryId }, seenAt: { N: String(report.seenAt) } } } },
        ReturnValues: "ALL_NEW",
      }),
    );
    return Object.entries(Attributes ?? {}).flatMap(([name, value]) => reportOf(name, value));
  }

  /** The stored id, or a new one put if none is there; a put that lost the race, or whose answer was lost, reads what is stored. */
  private async findOrMakeId(): Promise<string> {
    const stored = await this.readId();
    if (stored) return stored;
    const { client, tableName } = this.options.admission;
    const id = randomUUID();
    try {
      await client.send(
        new PutItemCommand({ TableName: tableName, Item: { ...this.idKey(), registryId: { S: id } }, ConditionExpression: "attribute_not_exists(#site)", ExpressionAttributeNames: { "#site": "site" } }),
      );
      return id;
    } catch (error) {
      const settled = await this.readId();
      if (settled) return settled;
      const why = error instanceof ConditionalCheckFailedException ? "another put won, and its id is gone again" : "the put's outcome is unknown";
      throw new SiteRegistriesError(`no registry id in ${tableName} for site ${this.options.site}: ${why}`, { cause: error });
    }
  }

  private async readId(): Promise<string | undefined> {
    const { client, tableName } = this.options.admission;
    const { Item } = await client.send(new GetItemCommand({ TableName: tableName, Key: this.idKey(), ConsistentRead: true }));
    return Item?.registryId?.S;
  }

  private idKey(): Record<string, AttributeValue> {
    return { site: { S: `registry#${this.options.site}` }, identity: { S: "id" } };
  }
}

/** One deployment's report, from its attribute; anything else in the item is not a report. */
function reportOf(name: string, value: AttributeValue): RegistryReport[] {
  if (!name.startsWith(REPORT_PREFIX)) return [];
  const registryId = value.M?.registryId?.S;
  const seenAt = Number(value.M?.seenAt?.N);
  return registryId && Number.isFinite(seenAt) ? [{ deploymentId: name.slice(REPORT_PREFIX.length), registryId, seenAt }] : [];
}
