/**
 * The one builder of the DynamoDB stores' conditional writes (lease, pause switch, admission) and
 * their reads. A write is described by attribute name: what it sets, removes and adds, and its
 * condition with `#attribute` and `:value` placeholders; the builder derives the name and value
 * maps, so an expression can never name an attribute or value that is missing from them, and
 * the maps carry nothing the expressions do not use (DynamoDB refuses unused entries).
 * Reads go through `unmarshall` and a zod schema of the item, so a decoder states the item's shape
 * once instead of testing each attribute's type tag.
 */
import { convertToAttr, unmarshall } from "@aws-sdk/util-dynamodb";
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { z } from "zod";
import { DynamoDbExpressionError } from "../errors";

type Scalar = string | number | boolean;

export interface WriteSpec {
  /** attribute name → value; an undefined value is left out of the SET clause. */
  set?: Record<string, Scalar | undefined>;
  remove?: readonly string[];
  /** attribute name → number added to it (created at that number when absent). */
  add?: Record<string, number>;
  /** Refers to attributes as `#name` and to `conditionValues` as `:key`. */
  condition?: string;
  conditionValues?: Record<string, Scalar>;
}

export interface WriteExpressions {
  UpdateExpression?: string;
  ConditionExpression?: string;
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues?: Record<string, AttributeValue>;
}

/** An attribute name DynamoDB accepts in a placeholder (`peers.<deployment>` is not one). */
const PLACEHOLDER_SAFE = /^[A-Za-z0-9_]+$/;

/** The value keys (`:key`) each distinct condition text uses, read once per text. */
const conditionValueKeys = new Map<string, string[]>();
/** The stores' conditions are a few constant texts; the bound keeps a caller building them from data from growing the cache. */
const CONDITION_CACHE_LIMIT = 256;

function valueKeysOf(condition: string): string[] {
  let keys = conditionValueKeys.get(condition);
  if (!keys) {
    keys = [...new Set([...condition.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1] ?? ""))];
    if (conditionValueKeys.size < CONDITION_CACHE_LIMIT) conditionValueKeys.set(condition, keys);
  }
  return keys;
}

export function writeExpressions(spec: WriteSpec): WriteExpressions {
  const names: Record<string, string> = {};
  const values: Record<string, AttributeValue> = {};
  // Every store write builds these maps (three per host provisioned), so lookups are by key, not by scanning.
  const placeholderOfAttribute = new Map<string, string>();
  let valueCount = 0;
  const nameOf = (attribute: string): string => {
    const existing = placeholderOfAttribute.get(attribute);
    if (existing) return existing;
    const placeholder = PLACEHOLDER_SAFE.test(attribute) ? `#${attribute}` : `#a${placeholderOfAttribute.size}`;
    placeholderOfAttribute.set(attribute, placeholder);
    names[placeholder] = attribute;
    return placeholder;
  };
  const valueOf = (key: string, value: Scalar): string => {
    const placeholder = `:${PLACEHOLDER_SAFE.test(key) ? key : `v${valueCount}`}`;
    const attribute = convertToAttr(value);
    const existing = values[placeholder];
    // Two parts of one write naming the same placeholder must mean the same value.
    if (existing && JSON.stringify(existing) !== JSON.stringify(attribute)) {
      throw new DynamoDbExpressionError(`the value placeholder ${placeholder} is given two different values`);
    }
    if (!existing) valueCount++;
    values[placeholder] = attribute;
    return placeholder;
  };

  const clauses: string[] = [];
  const set = Object.entries(spec.set ?? {}).filter((entry): entry is [string, Scalar] => entry[1] !== undefined);
  if (set.length > 0) clauses.push(`SET ${set.map(([attribute, value]) => `${nameOf(attribute)} = ${valueOf(attribute, value)}`).join(", ")}`);
  if (spec.remove?.length) clauses.push(`REMOVE ${spec.remove.map(nameOf).join(", ")}`);
  const add = Object.entries(spec.add ?? {});
  if (add.length > 0) clauses.push(`ADD ${add.map(([attribute, value]) => `${nameOf(attribute)} ${valueOf(`add_${attribute}`, value)}`).join(", ")}`);

  let condition: string | undefined;
  if (spec.condition !== undefined) {
    condition = spec.condition.replace(/#([A-Za-z0-9_]+)/g, (_, attribute: string) => nameOf(attribute));
    for (const key of valueKeysOf(spec.condition)) {
      const value = spec.conditionValues?.[key];
      if (value === undefined) throw new DynamoDbExpressionError(`the condition uses :${key}, which has no value`);
      valueOf(key, value);
    }
  }

  return {
    ...(clauses.length > 0 ? { UpdateExpression: clauses.join(" ") } : {}),
    ...(condition !== undefined ? { ConditionExpression: condition } : {}),
    ExpressionAttributeNames: names,
    ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
  };
}

/** A stored item as plain values, checked against its schema: undefined when absent or not of that shape. */
export function readItem<Schema extends z.ZodType>(schema: Schema, item: Record<string, AttributeValue> | undefined): z.infer<Schema> | undefined {
  if (!item) return undefined;
  const parsed = schema.safeParse(unmarshall(item));
  return parsed.success ? parsed.data : undefined;
}
