/**
 * LeaseStore on a DynamoDB table keyed by `site` (one item per site). Every operation is one
 * UpdateItem with a condition; on a condition failure DynamoDB returns the stored item
 * (ReturnValuesOnConditionCheckFailure), so the caller learns who holds the lease without a read.
 * The item is never deleted, so the term survives releases and only ever increases.
 */
import {
  ConditionalCheckFailedException,
  GetItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import * as z from "zod";
import { readItem, writeExpressions, type WriteSpec } from "./expression";
import { LeaseStoreError } from "../errors";
import { extensionOf, type ExtendedTiming } from "../lease/stored-lease";
import type { AnnounceRequest, ConditionalWrite, ExtendRequest, HolderBounds, LeaseItem, LeaseStore, PeerRequest, ReleaseRequest, ClaimRequest } from "../ports/lease-store";

/**
 * Each deployment that took part is one top-level attribute `peers.<id>` (epoch ms): a nested map
 * would need to exist before a SET could add to it, and items written before it have none.
 */
const PEER_PREFIX = "peers.";

/** What a claim or an extension records of its holder: its bounds and its presence. */
function boundsSet(holder: string, bounds: HolderBounds): WriteSpec["set"] {
  return { skewBoundMs: bounds.skewBoundMs, deliveryHorizonMs: bounds.deliveryHorizonMs, [`${PEER_PREFIX}${holder}`]: bounds.seenAt };
}

/**
 * "The stored delivery horizon is at most :<valueKey>", where one absent or not a number counts as
 * none, as the decoder reads it (a condition comparing a string with a number is false).
 */
function horizonAtMost(valueKey: string): string {
  return `(NOT attribute_type(#deliveryHorizonMs, :numberType) OR #deliveryHorizonMs <= :${valueKey})`;
}

/**
 * An extension is written again, from the item its failed condition returned, while the holder's
 * other containers keep moving the stored timing it is computed from; each retry sees a later
 * timing, so a few suffice. If they do not, the extension counts as not applied (the round holds
 * nothing; the gate reads the standing as unknown, since the item names this deployment).
 */
const EXTEND_ATTEMPTS = 4;

/**
 * The extension computed from `stored` (extensionOf), conditioned on the stored timing being still
 * the one it was computed from, so that no write in between is overtaken.
 */
function timingRaise(stored: LeaseItem, request: ExtendRequest, timing: ExtendedTiming): WriteSpec {
  const horizon = stored.deliveryHorizonMs;
  return {
    set: { expiresAt: timing.expiresAt, ...boundsSet(request.holder, { ...request, deliveryHorizonMs: timing.deliveryHorizonMs }) },
    condition: `#holder = :holder AND #term = :term AND attribute_not_exists(#released) AND #expiresAt = :storedExpiresAt AND ${
      horizon === undefined ? "NOT attribute_type(#deliveryHorizonMs, :numberType)" : "#deliveryHorizonMs = :storedHorizonMs"
    }`,
    conditionValues: {
      holder: request.holder,
      term: stored.term,
      storedExpiresAt: stored.expiresAt,
      ...(horizon === undefined ? { numberType: "N" } : { storedHorizonMs: horizon }),
    },
  };
}

/** An optional attribute of a wrong type is read as absent, as a missing one is. */
const optionalNumber = z.number().optional().catch(undefined);

const LEASE_ITEM = z
  .looseObject({
    site: z.string().min(1),
    holder: z.string(),
    term: z.number(),
    expiresAt: z.number(),
    announcedTerm: optionalNumber,
    released: z.boolean().optional().catch(undefined),
    skewBoundMs: optionalNumber,
    deliveryHorizonMs: optionalNumber,
  })
  .transform(({ site, holder, term, expiresAt, announcedTerm, released, skewBoundMs, deliveryHorizonMs, ...rest }): LeaseItem => {
    const item: LeaseItem = { site, holder, term, expiresAt };
    if (announcedTerm !== undefined) item.announcedTerm = announcedTerm;
    if (released) item.released = true;
    if (skewBoundMs !== undefined) item.skewBoundMs = skewBoundMs;
    if (deliveryHorizonMs !== undefined) item.deliveryHorizonMs = deliveryHorizonMs;
    const peers = Object.entries(rest).filter((entry): entry is [string, number] => entry[0].startsWith(PEER_PREFIX) && typeof entry[1] === "number");
    if (peers.length > 0) item.peers = Object.fromEntries(peers.map(([name, seenAt]) => [name.slice(PEER_PREFIX.length), seenAt]));
    return item;
  });

function decodeLeaseItem(item: Record<string, AttributeValue> | undefined): LeaseItem | undefined {
  return readItem(LEASE_ITEM, item);
}

export interface DynamoDbLeaseStoreOptions {
  client: DynamoDBClient;
  tableName: string;
}

export class DynamoDbLeaseStore implements LeaseStore {
  constructor(private readonly options: DynamoDbLeaseStoreOptions) {}

  claim(request: ClaimRequest): Promise<ConditionalWrite> {
    return this.update(request.site, {
      set: { holder: request.holder, expiresAt: request.expiresAt, ...boundsSet(request.holder, request) },
      remove: ["released"],
      add: { term: 1 },
      condition: `(attribute_not_exists(#site) OR #expiresAt < :expiredBefore) AND ${horizonAtMost("waitedHorizonMs")}`,
      conditionValues: { expiredBefore: request.expiredBefore, waitedHorizonMs: request.waitedHorizonMs, numberType: "N" },
    });
  }

  /**
   * extensionOf's rule in conditional writes. DynamoDB cannot take the larger of two values in an
   * update, so the first write covers the common case (a later expiry, and a stored horizon not
   * longer than ours: our deadline is then the later one too); when its condition fails, the
   * returned item says whether there is still something to raise, and the raise is written from it.
   */
  async extend(request: ExtendRequest): Promise<ConditionalWrite> {
    const term = request.term === undefined ? "" : " AND #term = :term";
    let write = await this.update(request.site, {
      set: { expiresAt: request.expiresAt, ...boundsSet(request.holder, request) },
      condition: `#holder = :holder AND #expiresAt < :expiresAt AND attribute_not_exists(#released)${term} AND ${horizonAtMost("deliveryHorizonMs")}`,
      conditionValues: {
        holder: request.holder,
        expiresAt: request.expiresAt,
        deliveryHorizonMs: request.deliveryHorizonMs,
        numberType: "N",
        ...(request.term === undefined ? {} : { term: request.term }),
      },
    });
    for (let attempt = 1; !write.applied && attempt < EXTEND_ATTEMPTS; attempt++) {
      const stored = write.current;
      const timing = stored && extensionOf(stored, request);
      if (!stored || !timing) return write;
      write = await this.update(request.site, timingRaise(stored, request, timing));
    }
    return write;
  }

  async recordPeer(request: PeerRequest): Promise<void> {
    try {
      await this.options.client.send(
        new UpdateItemCommand({
          TableName: this.options.tableName,
          Key: { site: { S: request.site } },
          ...writeExpressions({ set: { [`${PEER_PREFIX}${request.deployment}`]: request.seenAt }, condition: "attribute_exists(#site)" }),
        }),
      );
    } catch (error) {
      // No lease item yet: there is nothing to record presence in, and the next claim creates it.
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }

  release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.update(request.site, {
      set: { released: true },
      condition: "#holder = :holder AND #term = :term",
      conditionValues: { holder: request.holder, term: request.term },
    });
  }

  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.update(request.site, {
      set: { announcedTerm: request.term },
      condition: "#holder = :holder AND #term = :term AND (attribute_not_exists(#announcedTerm) OR #announcedTerm < :term)",
      conditionValues: { holder: request.holder, term: request.term },
    });
  }

  async read(site: string): Promise<LeaseItem | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: { site: { S: site } }, ConsistentRead: true }),
    );
    return decodeLeaseItem(Item);
  }

  private async update(site: string, write: WriteSpec): Promise<ConditionalWrite> {
    try {
      const { Attributes } = await this.options.client.send(
        new UpdateItemCommand({
          ...writeExpressions(write),
          TableName: this.options.tableName,
          Key: { site: { S: site } },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      const item = decodeLeaseItem(Attributes);
      if (!item) throw new LeaseStoreError(`DynamoDB returned no lease item for site ${site} after an applied update`);
      return { applied: true, item };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { applied: false, current: decodeLeaseItem(error.Item) };
      throw error;
    }
  }
}
