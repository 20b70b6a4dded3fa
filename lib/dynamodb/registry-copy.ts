/**
 * An admission table as `registry merge` reads and writes it (lib/app/registry-merge.ts): the
 * site's host items listed whole, as DynamoDB stores them (every attribute, those this release does
 * not know included), and put back whole with a condition that the stored item is still the one
 * read. DynamoDB cannot compare a whole item, so the condition compares every attribute read and
 * requires every other attribute name known here to be absent: the registry's own, and every name
 * seen in the items listed, read or written. The renewal state goes through DynamoDbRenewalStore.
 */
import {
  ConditionalCheckFailedException,
  DynamoDBServiceException,
  GetItemCommand,
  PutItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { ADMISSION_TTL_ATTRIBUTE } from "./admission-store";
import type { StoredHost } from "../admission/merge";
import { ENTRY_ATTRIBUTES } from "../ports/admission-entry";
import type { RegistryTable } from "../app/use-case-ports";
import { DynamoDbRenewalStore } from "./renewal-store";
import { querySite } from "./site-query";

type Item = Record<string, AttributeValue>;
type Host = StoredHost<AttributeValue>;

/** The attributes the admission registry writes, besides the key: the entry's, and the TTL the DynamoDB store adds. */
const REGISTRY_ATTRIBUTES: string[] = [...ENTRY_ATTRIBUTES, ADMISSION_TTL_ATTRIBUTE];
const KEY = ["site", "identity"];
/** The kinds of expiry the registry records; an item with another is read as having none, as the registry reads it. */
const EXPIRY_KINDS = new Set(["certificate", "server_jwt"]);

export class DynamoDbRegistryTable implements RegistryTable<AttributeValue> {
  readonly lifetimeAttributes = ["expiresAt", ADMISSION_TTL_ATTRIBUTE];
  readonly renewal: DynamoDbRenewalStore;
  /** Attribute names a still-unchanged item must not have unless it had them when read. */
  private readonly known = new Set(REGISTRY_ATTRIBUTES);

  constructor(
    private readonly client: DynamoDBClient,
    /** A table name or ARN; DynamoDB takes either. */
    readonly name: string,
  ) {
    this.renewal = new DynamoDbRenewalStore({ client, tableName: name });
  }

  async listHosts(site: string): Promise<Host[]> {
    const items = await querySite(this.client, { tableName: this.name, site, consistent: true });
    return items.map((item) => this.host(item));
  }

  async readHost(site: string, identity: string): Promise<Host | undefined> {
    const item = await this.read(site, identity);
    return item ? this.host(item) : undefined;
  }

  async putHost(host: Host, expected: Host | undefined): Promise<"written" | "changed"> {
    for (const name of Object.keys(host.attributes)) this.known.add(name);
    try {
      await this.client.send(new PutItemCommand({ TableName: this.name, Item: { ...host.attributes }, ...this.unchanged(expected) }));
      return "written";
    } catch (error) {
      // A refused condition may be our own put, applied on an attempt whose answer was lost and
      // refused on the SDK's retry; a transport failure or a 5xx leaves the outcome unknown. Either
      // way the item says what happened.
      if (!(error instanceof ConditionalCheckFailedException) && !outcomeUnknown(error)) throw error;
      const site = host.attributes.site?.S ?? "";
      const stored = await this.read(site, host.identity);
      return stored !== undefined && sameItem(stored, host.attributes) ? "written" : "changed";
    }
  }

  private async read(site: string, identity: string): Promise<Item | undefined> {
    const { Item } = await this.client.send(
      new GetItemCommand({ TableName: this.name, Key: { site: { S: site }, identity: { S: identity } }, ConsistentRead: true }),
    );
    if (Item) for (const name of Object.keys(Item)) this.known.add(name);
    return Item;
  }

  /** The condition that the stored item is still `expected` (or that there is none). */
  private unchanged(expected: Host | undefined) {
    if (!expected) return { ConditionExpression: "attribute_not_exists(#identity)", ExpressionAttributeNames: { "#identity": "identity" } };
    const names: Record<string, string> = { "#identity": "identity" };
    const values: Item = {};
    const parts = ["attribute_exists(#identity)"];
    let index = 0;
    for (const [name, value] of Object.entries(expected.attributes)) {
      if (KEY.includes(name)) continue;
      names[`#a${index}`] = name;
      values[`:a${index}`] = value;
      parts.push(`#a${index} = :a${index}`);
      index++;
    }
    for (const name of this.known) {
      if (name in expected.attributes || KEY.includes(name)) continue;
      names[`#a${index}`] = name;
      parts.push(`attribute_not_exists(#a${index})`);
      index++;
    }
    return {
      ConditionExpression: parts.join(" AND "),
      ExpressionAttributeNames: names,
      ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
    };
  }

  private host(item: Item): Host {
    for (const name of Object.keys(item)) this.known.add(name);
    const number = (name: string) => {
      const text = item[name]?.N;
      return text === undefined ? undefined : Number(text);
    };
    const expiresAt = number("credentialsExpireAt");
    const kind = item.expiryKind?.S;
    const issuedAt = number("credentialsIssuedAt");
    const claimedUntil = item.claimToken?.S === undefined ? undefined : number("claimedUntil");
    return {
      identity: item.identity?.S ?? "",
      attributes: item,
      ...(expiresAt !== undefined && kind !== undefined && EXPIRY_KINDS.has(kind)
        ? { credentials: { expiresAt, ...(issuedAt === undefined ? {} : { issuedAt }) } }
        : {}),
      keptUntil: number("expiresAt") ?? 0,
      ...(claimedUntil === undefined ? {} : { claimedUntil }),
    };
  }
}

/** A failure after which the put may or may not have been applied: no answer, or DynamoDB's own fault. */
function outcomeUnknown(error: unknown): boolean {
  return !(error instanceof DynamoDBServiceException) || error.$fault === "server";
}

/** Two items alike attribute by attribute, whatever order their maps were built in. */
function sameItem(a: Item, b: Item): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, field]) => field !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, field]) => `${JSON.stringify(key)}:${canonical(field)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
