/**
 * AdmissionStore on a DynamoDB table keyed by `site` + `identity`; the only code that knows the
 * item layout. Each write is one conditional write on the exact admission or claim it acts on, so
 * it never undoes a newer admission or another worker's claim; a condition failure returns the
 * stored entry. `ttl` (epoch seconds) lets DynamoDB delete entries no rule reads any more; no rule
 * depends on that deletion happening.
 */
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteItemCommand,
  GetItemCommand,
  QueryCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type {
  AdmissionEntry,
  AdmissionKey,
  AdmissionState,
  AdmissionStore,
  AdmissionSummaryRow,
  AdmissionWrite,
  AdmitRequest,
  ClaimRequest,
  ForgetQueuedRequest,
  ForgetRequest,
  ForgetUnlessClaimedRequest,
  MarkProvisionedRequest,
  RecordFailureRequest,
  ReleaseClaimRequest,
  VoidClaimRequest,
} from "./registry";
import type { AdmissionSource } from "../ports";

export const ADMISSION_TTL_ATTRIBUTE = "ttl";

export interface DynamoDbAdmissionStoreOptions {
  client: DynamoDBClient;
  tableName: string;
}

const n = (value: number): AttributeValue => ({ N: String(value) });
const s = (value: string): AttributeValue => ({ S: value });
const ttlOf = (expiresAt: number) => n(Math.ceil(expiresAt / 1000));

export class DynamoDbAdmissionStore implements AdmissionStore {
  constructor(private readonly options: DynamoDbAdmissionStoreOptions) {}

  /** An UpdateItem, not a Put, so the failure record and last error survive re-admission. */
  admit({ entry, blockIfAdmittedAfter, now }: AdmitRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(entry),
        UpdateExpression:
          "SET #term = :term, #admittedAt = :admittedAt, #source = :source, #state = :state, #admissionId = :admissionId," +
          " #expiresAt = :expiresAt, #ttl = :ttl REMOVE #claimToken, #claimedUntil, #heldUntil, #endedClaimToken",
        ConditionExpression:
          "attribute_not_exists(#identity) OR ((attribute_not_exists(#admissionId) OR #admissionId <> :admissionId)" +
          " AND ((#state = :parked AND #heldUntil <= :now) OR (#state <> :parked AND (#state = :failed" +
          " OR #term < :term OR (#term = :term AND #admittedAt <= :blockAfter" +
          " AND (attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now)" +
          " AND (attribute_not_exists(#heldUntil) OR #heldUntil <= :now))))))",
        ExpressionAttributeNames: {
          "#identity": "identity",
          "#term": "term",
          "#admittedAt": "admittedAt",
          "#source": "source",
          "#state": "state",
          "#expiresAt": "expiresAt",
          "#ttl": ADMISSION_TTL_ATTRIBUTE,
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
          "#heldUntil": "heldUntil",
          "#admissionId": "admissionId",
          "#endedClaimToken": "endedClaimToken",
        },
        ExpressionAttributeValues: {
          ":term": n(entry.term),
          ":admissionId": s(entry.admissionId),
          ":admittedAt": n(entry.admittedAt),
          ":source": s(entry.source),
          ":state": s(entry.state),
          ":expiresAt": n(entry.expiresAt),
          ":ttl": ttlOf(entry.expiresAt),
          ":blockAfter": n(blockIfAdmittedAfter),
          ":now": n(now),
          ":parked": s("parked"),
          ":failed": s("failed"),
        },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  claim(request: ClaimRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        UpdateExpression:
          "SET #state = :provisioning, #claimToken = :token, #claimedUntil = :claimedUntil, #expiresAt = :expiresAt, #ttl = :ttl",
        ConditionExpression:
          "#term = :term AND #admittedAt = :admittedAt AND #state <> :provisioned" +
          " AND (attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now)" +
          " AND (attribute_not_exists(#endedClaimToken) OR #endedClaimToken <> :token)",
        ExpressionAttributeNames: {
          "#state": "state",
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
          "#expiresAt": "expiresAt",
          "#ttl": ADMISSION_TTL_ATTRIBUTE,
          "#term": "term",
          "#admittedAt": "admittedAt",
          "#endedClaimToken": "endedClaimToken",
        },
        ExpressionAttributeValues: {
          ":provisioning": s("provisioning"),
          ":provisioned": s("provisioned"),
          ":token": s(request.claimToken),
          ":claimedUntil": n(request.claimedUntil),
          ":expiresAt": n(request.expiresAt),
          ":ttl": ttlOf(request.expiresAt),
          ":term": n(request.term),
          ":admittedAt": n(request.admittedAt),
          ":now": n(request.now),
        },
        ReturnValues: "ALL_NEW",
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  markProvisioned(request: MarkProvisionedRequest): Promise<AdmissionWrite> {
    const { credentials } = request;
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        UpdateExpression:
          "SET #state = :provisioned, #heldUntil = :heldUntil, #expiresAt = :expiresAt, #ttl = :ttl, #endedClaimToken = :token" +
          (credentials ? ", #credentialsExpireAt = :credentialsExpireAt, #expiryKind = :expiryKind, #credentialsIssuedAt = :credentialsIssuedAt" : "") +
          " REMOVE #claimToken, #claimedUntil, #lastError, #lastErrorAt, #failedStep, #failures" +
          (credentials ? "" : ", #credentialsExpireAt, #expiryKind, #credentialsIssuedAt"),
        ConditionExpression: "#claimToken = :token",
        ExpressionAttributeNames: {
          "#credentialsExpireAt": "credentialsExpireAt",
          "#expiryKind": "expiryKind",
          "#credentialsIssuedAt": "credentialsIssuedAt",
          "#state": "state",
          "#heldUntil": "heldUntil",
          "#expiresAt": "expiresAt",
          "#ttl": ADMISSION_TTL_ATTRIBUTE,
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
          "#lastError": "lastError",
          "#lastErrorAt": "lastErrorAt",
          "#failedStep": "failedStep",
          "#failures": "failures",
          "#endedClaimToken": "endedClaimToken",
        },
        ExpressionAttributeValues: {
          ":provisioned": s("provisioned"),
          ":heldUntil": n(request.heldUntil),
          ":expiresAt": n(request.expiresAt),
          ":ttl": ttlOf(request.expiresAt),
          ":token": s(request.claimToken),
          ...(credentials
            ? { ":credentialsExpireAt": n(credentials.expiresAt), ":expiryKind": s(credentials.kind), ":credentialsIssuedAt": n(credentials.issuedAt) }
            : {}),
        },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  forget(request: ForgetRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new DeleteItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        ConditionExpression: "#claimToken = :token",
        ExpressionAttributeNames: { "#claimToken": "claimToken" },
        ExpressionAttributeValues: { ":token": s(request.claimToken) },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  recordFailure(request: RecordFailureRequest): Promise<AdmissionWrite> {
    const hold = request.heldUntil === undefined ? "" : ", #heldUntil = :heldUntil";
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        UpdateExpression:
          "SET #state = :state, #failedStep = :failedStep, #failures = :failures, #lastError = :lastError, #lastErrorAt = :lastErrorAt," +
          ` #expiresAt = :expiresAt, #ttl = :ttl, #endedClaimToken = :token${hold} REMOVE #claimToken, #claimedUntil` +
          (request.heldUntil === undefined ? ", #heldUntil" : ""),
        ConditionExpression: "#claimToken = :token",
        ExpressionAttributeNames: {
          "#state": "state",
          "#failedStep": "failedStep",
          "#failures": "failures",
          "#lastError": "lastError",
          "#lastErrorAt": "lastErrorAt",
          "#expiresAt": "expiresAt",
          "#ttl": ADMISSION_TTL_ATTRIBUTE,
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
          "#heldUntil": "heldUntil",
          "#endedClaimToken": "endedClaimToken",
        },
        ExpressionAttributeValues: {
          ":state": s(request.state),
          ":failedStep": s(request.failedStep),
          ":failures": n(request.failures),
          ":lastError": s(request.lastError),
          ":lastErrorAt": n(request.lastErrorAt),
          ":expiresAt": n(request.expiresAt),
          ":ttl": ttlOf(request.expiresAt),
          ":token": s(request.claimToken),
          ...(request.heldUntil === undefined ? {} : { ":heldUntil": n(request.heldUntil) }),
        },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  releaseClaim(request: ReleaseClaimRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        UpdateExpression:
          "SET #state = :queued, #lastError = :lastError, #lastErrorAt = :lastErrorAt, #endedClaimToken = :token REMOVE #claimToken, #claimedUntil",
        ConditionExpression: "#claimToken = :token",
        ExpressionAttributeNames: {
          "#state": "state",
          "#lastError": "lastError",
          "#lastErrorAt": "lastErrorAt",
          "#claimToken": "claimToken",
          "#claimedUntil": "claimedUntil",
          "#endedClaimToken": "endedClaimToken",
        },
        ExpressionAttributeValues: {
          ":queued": s("queued"),
          ":lastError": s(request.lastError),
          ":lastErrorAt": n(request.lastErrorAt),
          ":token": s(request.claimToken),
        },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  voidClaim(request: VoidClaimRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        UpdateExpression: "SET #endedClaimToken = :token",
        ConditionExpression: "attribute_exists(#identity) AND (attribute_not_exists(#claimToken) OR #claimToken <> :token)",
        ExpressionAttributeNames: { "#identity": "identity", "#claimToken": "claimToken", "#endedClaimToken": "endedClaimToken" },
        ExpressionAttributeValues: { ":token": s(request.claimToken) },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  forgetQueued(request: ForgetQueuedRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new DeleteItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        ConditionExpression: "#term = :term AND #admittedAt = :admittedAt AND attribute_not_exists(#claimToken)",
        ExpressionAttributeNames: { "#term": "term", "#admittedAt": "admittedAt", "#claimToken": "claimToken" },
        ExpressionAttributeValues: { ":term": n(request.term), ":admittedAt": n(request.admittedAt) },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  forgetUnlessClaimed(request: ForgetUnlessClaimedRequest): Promise<AdmissionWrite> {
    return this.conditional(
      new DeleteItemCommand({
        TableName: this.options.tableName,
        Key: this.key(request),
        ConditionExpression: "attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now",
        ExpressionAttributeNames: { "#claimedUntil": "claimedUntil" },
        ExpressionAttributeValues: { ":now": n(request.now) },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  async listSite(site: string): Promise<AdmissionSummaryRow[]> {
    const rows: AdmissionSummaryRow[] = [];
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.options.client.send(
        new QueryCommand({
          TableName: this.options.tableName,
          KeyConditionExpression: "#site = :site",
          ProjectionExpression:
            "#identity, #term, #state, #lastError, #lastErrorAt, #failedStep, #failures, #credentialsExpireAt, #expiryKind, #credentialsIssuedAt",
          ExpressionAttributeNames: {
            "#credentialsExpireAt": "credentialsExpireAt",
            "#expiryKind": "expiryKind",
            "#credentialsIssuedAt": "credentialsIssuedAt",
            "#failedStep": "failedStep",
            "#failures": "failures",
            "#site": "site",
            "#identity": "identity",
            "#term": "term",
            "#state": "state",
            "#lastError": "lastError",
            "#lastErrorAt": "lastErrorAt",
          },
          ExpressionAttributeValues: { ":site": s(site) },
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of page.Items ?? []) rows.push(decodeSummaryRow(item));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return rows;
  }

  async read(key: AdmissionKey): Promise<AdmissionEntry | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: this.key(key), ConsistentRead: true }),
    );
    return decodeEntry(Item);
  }

  private key({ site, identity }: AdmissionKey): Record<string, AttributeValue> {
    return { site: s(site), identity: s(identity) };
  }

  private async conditional(command: UpdateItemCommand | DeleteItemCommand): Promise<AdmissionWrite> {
    try {
      // The union of command types does not narrow `send`'s overloads; each is a plain write.
      const { Attributes } = await this.options.client.send(command as UpdateItemCommand);
      const entry = decodeEntry(Attributes);
      return entry ? { applied: true, entry } : { applied: true };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { applied: false, current: decodeEntry(error.Item) };
      throw error;
    }
  }
}

function decodeEntry(item: Record<string, AttributeValue> | undefined): AdmissionEntry | undefined {
  if (!item?.site?.S || !item.identity?.S || !item.term?.N || !item.admittedAt?.N) return undefined;
  const optionalNumber = (value: AttributeValue | undefined) => (value?.N === undefined ? undefined : Number(value.N));
  const entry: AdmissionEntry = {
    site: item.site.S,
    identity: item.identity.S,
    term: Number(item.term.N),
    admittedAt: Number(item.admittedAt.N),
    source: (item.source?.S ?? "discovery") as AdmissionSource,
    state: (item.state?.S ?? "queued") as AdmissionState,
    expiresAt: Number(item.expiresAt?.N ?? 0),
  };
  if (item.admissionId?.S !== undefined) entry.admissionId = item.admissionId.S;
  if (item.claimToken?.S !== undefined) entry.claimToken = item.claimToken.S;
  if (item.endedClaimToken?.S !== undefined) entry.endedClaimToken = item.endedClaimToken.S;
  const claimedUntil = optionalNumber(item.claimedUntil);
  if (claimedUntil !== undefined) entry.claimedUntil = claimedUntil;
  const heldUntil = optionalNumber(item.heldUntil);
  if (heldUntil !== undefined) entry.heldUntil = heldUntil;
  if (item.lastError?.S !== undefined) entry.lastError = item.lastError.S;
  const lastErrorAt = optionalNumber(item.lastErrorAt);
  if (lastErrorAt !== undefined) entry.lastErrorAt = lastErrorAt;
  if (item.failedStep?.S !== undefined) entry.failedStep = item.failedStep.S;
  const failures = optionalNumber(item.failures);
  if (failures !== undefined) entry.failures = failures;
  Object.assign(entry, decodeExpiry(item));
  return entry;
}

function decodeSummaryRow(item: Record<string, AttributeValue>): AdmissionSummaryRow {
  const row: AdmissionSummaryRow = {
    identity: item.identity?.S ?? "",
    term: Number(item.term?.N ?? 0),
    state: (item.state?.S ?? "queued") as AdmissionState,
  };
  if (item.lastError?.S !== undefined) row.lastError = item.lastError.S;
  if (item.lastErrorAt?.N !== undefined) row.lastErrorAt = Number(item.lastErrorAt.N);
  if (item.failedStep?.S !== undefined) row.failedStep = item.failedStep.S;
  if (item.failures?.N !== undefined) row.failures = Number(item.failures.N);
  return Object.assign(row, decodeExpiry(item));
}

function decodeExpiry(item: Record<string, AttributeValue>): Pick<AdmissionEntry, "credentialsExpireAt" | "expiryKind" | "credentialsIssuedAt"> {
  const kind = item.expiryKind?.S;
  if (item.credentialsExpireAt?.N === undefined || (kind !== "certificate" && kind !== "server_jwt")) return {};
  return {
    credentialsExpireAt: Number(item.credentialsExpireAt.N),
    expiryKind: kind,
    ...(item.credentialsIssuedAt?.N === undefined ? {} : { credentialsIssuedAt: Number(item.credentialsIssuedAt.N) }),
  };
}

/** Creates the admission table (on-demand, TTL on `ttl`) and waits until it is active; for tests and the local run. */
export async function createAdmissionTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "site", AttributeType: "S" },
        { AttributeName: "identity", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "site", KeyType: "HASH" },
        { AttributeName: "identity", KeyType: "RANGE" },
      ],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 60, minDelay: 1, maxDelay: 2 }, { TableName: tableName });
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: ADMISSION_TTL_ATTRIBUTE, Enabled: true },
    }),
  );
}
