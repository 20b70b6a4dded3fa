import { describe, expect, it } from "vitest";
import * as z from "zod";
import { readItem, writeExpressions } from "../../../lib/dynamodb/expression";
import { DynamoDbExpressionError } from "../../../lib/errors";

describe("DynamoDB write expressions", () => {
  it("names every attribute and value the expressions use, and nothing else", () => {
    const write = writeExpressions({
      set: { holder: "prod-eu", "peers.prod-eu": 7, skipped: undefined },
      remove: ["released"],
      add: { term: 1 },
      condition: "attribute_not_exists(#site) OR #expiresAt < :expiredBefore",
      conditionValues: { expiredBefore: 30_000, unused: "never sent" },
    });

    expect(write).toEqual({
      UpdateExpression: "SET #holder = :holder, #a1 = :v1 REMOVE #released ADD #term :add_term",
      ConditionExpression: "attribute_not_exists(#site) OR #expiresAt < :expiredBefore",
      ExpressionAttributeNames: { "#holder": "holder", "#a1": "peers.prod-eu", "#released": "released", "#term": "term", "#site": "site", "#expiresAt": "expiresAt" },
      ExpressionAttributeValues: { ":holder": { S: "prod-eu" }, ":v1": { N: "7" }, ":add_term": { N: "1" }, ":expiredBefore": { N: "30000" } },
    });
  });

  it("shares a placeholder between the update and the condition when they mean the same value", () => {
    const write = writeExpressions({ set: { expiresAt: 40_000 }, condition: "#expiresAt < :expiresAt", conditionValues: { expiresAt: 40_000 } });

    expect(write.ExpressionAttributeValues).toEqual({ ":expiresAt": { N: "40000" } });
  });

  it("refuses one placeholder with two values, naming it", () => {
    expect(() => writeExpressions({ set: { term: 2 }, condition: "#term = :term", conditionValues: { term: 1 } })).toThrow(
      new DynamoDbExpressionError("the value placeholder :term is given two different values"),
    );
  });

  it("refuses a condition value that was not given, naming it", () => {
    expect(() => writeExpressions({ condition: "#holder = :holder" })).toThrow(new DynamoDbExpressionError("the condition uses :holder, which has no value"));
  });
});

describe("DynamoDB item reads", () => {
  const SCHEMA = z.object({ site: z.string(), term: z.number() });

  it("reads an item as plain values through its schema", () => {
    expect(readItem(SCHEMA, { site: { S: "lon" }, term: { N: "3" } })).toEqual({ site: "lon", term: 3 });
  });

  it("reads an absent item, or one not of the schema's shape, as undefined", () => {
    expect(readItem(SCHEMA, undefined)).toBeUndefined();
    expect(readItem(SCHEMA, { site: { S: "lon" }, term: { S: "3" } })).toBeUndefined();
  });
});
