/**
 * AdmissionStore on a DynamoDB table keyed by `site` + `identity`; with admission-items.ts, which
 * reads the items back, the only code that knows the item layout. Each write is one conditional
 * write on the exact admission or claim it acts on, so it never undoes a newer admission or another
 * worker's claim; a condition failure returns the stored entry. `ttl` (epoch seconds) lets DynamoDB
 * delete entries no rule reads any more; no rule depends on that deletion happening. The names a
 * discovery left waiting are one item of their own partition (`discovery#<site>`), so the site's
 * host listing never reads them.
 */
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { AdmissionEntry, AdmissionKey, AdmissionSummaryRow } from "../ports/admission-entry";
import type { CredentialsExpiry, ProvisioningJwtExpiry } from "../ports/credentials";
import type { AdmissionStore, AdmissionWrite, AdmitRequest, ForgetQueuedRequest, ForgetRequest, ForgetUnlessClaimedRequest, MarkProvisionedRequest, QuarantineRequest, ReleaseQuarantineRequest, MarkRenewalRequest, RecordCredentialsRequest, RecordFailureRequest, ReleaseClaimRequest, RememberWaitingRequest, VoidClaimRequest, WaitingName, ClaimRequest } from "../ports/admission-store";
import { CREDENTIAL_ATTRIBUTES, FAILURE_ATTRIBUTES, FORGOTTEN_WITH_CREDENTIALS, QUARANTINE_ATTRIBUTES, RENEWAL_ATTRIBUTES, SUMMARY_ATTRIBUTES } from "../ports/admission-entry";
import { decodeEntry, SUMMARY_ROW, WAITING } from "./admission-items";
import { readItem, writeExpressions, type WriteSpec } from "./expression";
import { DynamoDbDirectWrites } from "./direct-writes";
import { querySite } from "./site-query";

export const ADMISSION_TTL_ATTRIBUTE = "ttl";

export interface DynamoDbAdmissionStoreOptions {
  client: DynamoDBClient;
  tableName: string;
}

/** DynamoDB's TTL reads epoch seconds. */
const ttlOf = (expiresAt: number) => Math.ceil(expiresAt / 1000);

/** The key of a site's names waiting for discovery: a partition of their own, as renewal's state has (`renewal#<site>`). */
const waitingKey = (site: string): Record<string, AttributeValue> => ({ site: { S: `discovery#${site}` }, identity: { S: "waiting-names" } });

/** The claim attributes every write that ends a claim removes. */
const CLAIM = ["claimToken", "claimedUntil"] as const;

export class DynamoDbAdmissionStore implements AdmissionStore {
  /** The conditional writes, four per host provisioned, skip the SDK's per-call pipeline. */
  private readonly writes: DynamoDbDirectWrites;

  constructor(private readonly options: DynamoDbAdmissionStoreOptions) {
    this.writes = new DynamoDbDirectWrites(options.client);
  }

  /** An UpdateItem, not a Put, so the failure record and last error survive re-admission. */
  admit({ entry, blockIfAdmittedAfter, now }: AdmitRequest): Promise<AdmissionWrite> {
    return this.update(entry, {
      set: {
        term: entry.term,
        admittedAt: entry.admittedAt,
        source: entry.source,
        state: entry.state,
        admissionId: entry.admissionId,
        expiresAt: entry.expiresAt,
        [ADMISSION_TTL_ATTRIBUTE]: ttlOf(entry.expiresAt),
      },
      remove: [...CLAIM, "heldUntil", "endedClaimToken"],
      condition:
        "attribute_not_exists(#identity) OR ((attribute_not_exists(#admissionId) OR #admissionId <> :admissionId) AND #state <> :quarantined" +
        " AND ((#state = :parked AND #heldUntil <= :now) OR (#state <> :parked AND (#state = :failed" +
        " OR #term < :term OR (#term = :term AND #admittedAt <= :blockAfter" +
        " AND (attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now)" +
        " AND (attribute_not_exists(#heldUntil) OR #heldUntil <= :now))))))",
      conditionValues: { admissionId: entry.admissionId, term: entry.term, blockAfter: blockIfAdmittedAfter, now, parked: "parked", failed: "failed", quarantined: "quarantined" },
    });
  }

  claim(request: ClaimRequest): Promise<AdmissionWrite> {
    return this.update(
      request,
      {
        set: {
          state: "provisioning",
          claimToken: request.claimToken,
          claimedUntil: request.claimedUntil,
          expiresAt: request.expiresAt,
          [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt),
        },
        condition:
          "#term = :term AND #admittedAt = :admittedAt AND #state <> :provisioned AND #state <> :quarantined" +
          " AND (attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now)" +
          " AND (attribute_not_exists(#endedClaimToken) OR #endedClaimToken <> :claimToken)",
        conditionValues: { term: request.term, admittedAt: request.admittedAt, provisioned: "provisioned", quarantined: "quarantined", now: request.now, claimToken: request.claimToken },
      },
      "ALL_NEW",
    );
  }

  markProvisioned(request: MarkProvisionedRequest): Promise<AdmissionWrite> {
    const { credentials } = request;
    return this.update(request, {
      set: {
        state: "provisioned",
        heldUntil: request.heldUntil,
        expiresAt: request.expiresAt,
        [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt),
        endedClaimToken: request.claimToken,
        ...(credentials ? credentialAttributes(credentials) : {}),
        ...provisioningJwtAttributes(request.provisioningJwt),
      },
      remove: [...CLAIM, ...FAILURE_ATTRIBUTES, ...RENEWAL_ATTRIBUTES, ...(credentials ? (credentials.credentialId === undefined ? ["credentialId"] : []) : CREDENTIAL_ATTRIBUTES)],
      ...ownClaim(request.claimToken),
    });
  }

  recordCredentials(request: RecordCredentialsRequest): Promise<AdmissionWrite> {
    const { credentials } = request;
    return this.update(request, {
      set: {
        ...credentialAttributes(credentials),
        expiresAt: request.expiresAt,
        [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt),
      },
      remove: [...RENEWAL_ATTRIBUTES, ...(credentials.credentialId === undefined ? ["credentialId"] : [])],
      ...ownClaim(request.claimToken),
    });
  }

  markRenewal(request: MarkRenewalRequest): Promise<AdmissionWrite> {
    const { mark } = request;
    return this.update(request, {
      ...(mark ? { set: { renewalAttempts: mark.attempts, renewalRetryAt: mark.retryAt, renewalError: mark.reason, renewalErrorAt: mark.at } } : {}),
      ...(mark ? {} : { remove: RENEWAL_ATTRIBUTES }),
      condition: "#credentialsIssuedAt = :issuedAt",
      conditionValues: { issuedAt: request.credentialsIssuedAt },
    });
  }

  /** A claim still on its way cannot take the host: its admission time is no longer the entry's, and claims skip quarantined hosts. */
  quarantine(request: QuarantineRequest): Promise<AdmissionWrite> {
    return this.update(request, {
      set: {
        state: "quarantined",
        term: request.term,
        admittedAt: request.at,
        source: request.source,
        quarantineReason: request.reason,
        quarantineEvidence: request.evidence,
        quarantinedAt: request.at,
        expiresAt: request.expiresAt,
        [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt),
      },
      remove: [...CLAIM, "heldUntil", "admissionId"],
    });
  }

  releaseQuarantine(request: ReleaseQuarantineRequest): Promise<AdmissionWrite> {
    return this.deleteUnlessCredentials(
      request,
      { condition: "#state = :quarantined AND #quarantinedAt = :at", conditionValues: { quarantined: "quarantined", at: request.quarantinedAt } },
      { set: { expiresAt: request.expiresAt, [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt) }, remove: QUARANTINE_ATTRIBUTES },
    );
  }

  forget(request: ForgetRequest): Promise<AdmissionWrite> {
    return this.deleteUnlessCredentials(request, ownClaim(request.claimToken), { set: { endedClaimToken: request.claimToken }, remove: CLAIM });
  }

  recordFailure(request: RecordFailureRequest): Promise<AdmissionWrite> {
    return this.update(request, {
      set: {
        state: request.state,
        failedStep: request.failedStep,
        failures: request.failures,
        lastError: request.lastError,
        lastErrorAt: request.lastErrorAt,
        expiresAt: request.expiresAt,
        [ADMISSION_TTL_ATTRIBUTE]: ttlOf(request.expiresAt),
        endedClaimToken: request.claimToken,
        heldUntil: request.heldUntil,
        ...provisioningJwtAttributes(request.provisioningJwt),
      },
      remove: [...CLAIM, ...(request.heldUntil === undefined ? ["heldUntil"] : [])],
      ...ownClaim(request.claimToken),
    });
  }

  releaseClaim(request: ReleaseClaimRequest): Promise<AdmissionWrite> {
    return this.update(request, {
      set: { state: "queued", lastError: request.lastError, lastErrorAt: request.lastErrorAt, endedClaimToken: request.claimToken },
      remove: CLAIM,
      ...ownClaim(request.claimToken),
    });
  }

  voidClaim(request: VoidClaimRequest): Promise<AdmissionWrite> {
    return this.update(request, {
      set: { endedClaimToken: request.claimToken },
      condition: "attribute_exists(#identity) AND (attribute_not_exists(#claimToken) OR #claimToken <> :token)",
      conditionValues: { token: request.claimToken },
    });
  }

  forgetQueued(request: ForgetQueuedRequest): Promise<AdmissionWrite> {
    return this.deleteUnlessCredentials(
      request,
      { condition: "#term = :term AND #admittedAt = :admittedAt AND attribute_not_exists(#claimToken)", conditionValues: { term: request.term, admittedAt: request.admittedAt } },
      {},
    );
  }

  forgetUnlessClaimed(request: ForgetUnlessClaimedRequest): Promise<AdmissionWrite> {
    return this.deleteUnlessCredentials(
      request,
      { condition: "attribute_not_exists(#claimedUntil) OR #claimedUntil <= :now", conditionValues: { now: request.now } },
      { remove: FORGOTTEN_WITH_CREDENTIALS },
    );
  }

  /**
   * Deletes the entry where `when` holds, unless it has recorded credentials: the node may be in
   * service on them, so the entry is kept, failed, for renewal, with `kept` written to it.
   */
  private async deleteUnlessCredentials(key: AdmissionKey, when: Pick<WriteSpec, "condition" | "conditionValues">, kept: Pick<WriteSpec, "set" | "remove">): Promise<AdmissionWrite> {
    const { conditionValues } = when;
    const deleted = await this.delete(key, { condition: `(${when.condition}) AND attribute_not_exists(#credentialsExpireAt)`, conditionValues });
    if (deleted.applied || deleted.current?.credentialsExpireAt === undefined) return deleted;
    return this.update(key, { set: { state: "failed", ...kept.set }, ...(kept.remove ? { remove: kept.remove } : {}), condition: `(${when.condition}) AND attribute_exists(#credentialsExpireAt)`, conditionValues });
  }

  async listSite(site: string): Promise<AdmissionSummaryRow[]> {
    const items = await querySite(this.options.client, { tableName: this.options.tableName, site, attributes: SUMMARY_ATTRIBUTES });
    return items.flatMap((item) => readItem(SUMMARY_ROW, item) ?? []);
  }

  async read(key: AdmissionKey): Promise<AdmissionEntry | undefined> {
    const { Item } = await this.options.client.send(
      new GetItemCommand({ TableName: this.options.tableName, Key: this.key(key), ConsistentRead: true }),
    );
    return decodeEntry(Item);
  }

  async readWaiting(site: string): Promise<WaitingName[]> {
    const { Item } = await this.options.client.send(new GetItemCommand({ TableName: this.options.tableName, Key: waitingKey(site), ConsistentRead: true }));
    return readItem(WAITING, Item) ?? [];
  }

  /** A whole-item put: the list is rewritten by each discovery that changes it, and only the leader discovers. */
  async rememberWaiting({ site, names, expiresAt }: RememberWaitingRequest): Promise<void> {
    const { client, tableName } = this.options;
    if (names.length === 0) {
      await client.send(new DeleteItemCommand({ TableName: tableName, Key: waitingKey(site) }));
      return;
    }
    const list = names.map(({ identity, firstSeen, lastSeen }) => ({ L: [{ S: identity }, { N: String(firstSeen) }, { N: String(lastSeen) }] }));
    const Item = { ...waitingKey(site), names: { L: list }, expiresAt: { N: String(expiresAt) }, [ADMISSION_TTL_ATTRIBUTE]: { N: String(ttlOf(expiresAt)) } };
    await client.send(new PutItemCommand({ TableName: tableName, Item }));
  }

  private key({ site, identity }: AdmissionKey): Record<string, AttributeValue> {
    return { site: { S: site }, identity: { S: identity } };
  }

  private update(key: AdmissionKey, write: WriteSpec, returnValues?: "ALL_NEW"): Promise<AdmissionWrite> {
    return this.conditional(
      this.writes.updateItem({
        TableName: this.options.tableName,
        Key: this.key(key),
        ...writeExpressions(write),
        ...(returnValues ? { ReturnValues: returnValues } : {}),
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
  }

  private delete(key: AdmissionKey, write: Pick<WriteSpec, "condition" | "conditionValues">): Promise<AdmissionWrite> {
    return this.conditional(
      this.writes.deleteItem({ TableName: this.options.tableName, Key: this.key(key), ...writeExpressions(write), ReturnValuesOnConditionCheckFailure: "ALL_OLD" }),
    );
  }

  private async conditional(write: Promise<{ Attributes?: Record<string, AttributeValue> }>): Promise<AdmissionWrite> {
    try {
      const { Attributes } = await write;
      const entry = decodeEntry(Attributes);
      return entry ? { applied: true, entry } : { applied: true };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { applied: false, current: decodeEntry(error.Item) };
      throw error;
    }
  }
}

/** The entry's record of the credentials (CREDENTIAL_ATTRIBUTES). */
function credentialAttributes(credentials: CredentialsExpiry): Record<string, string | number> {
  return {
    credentialsExpireAt: credentials.expiresAt,
    expiryKind: credentials.kind,
    credentialsIssuedAt: credentials.issuedAt,
    ...(credentials.credentialId === undefined ? {} : { credentialId: credentials.credentialId }),
  };
}

/** The attributes of a presented provisioning JWT; none when it is not known, so the one recorded before stays. */
function provisioningJwtAttributes(presented: ProvisioningJwtExpiry | undefined): Record<string, string | number> {
  return presented ? { provisioningJwtIssuer: presented.issuer, provisioningJwtExpiresAt: presented.expiresAt } : {};
}

/** The write acts on the claim it names and on no other. */
function ownClaim(claimToken: string): Pick<WriteSpec, "condition" | "conditionValues"> {
  return { condition: "#claimToken = :token", conditionValues: { token: claimToken } };
}
