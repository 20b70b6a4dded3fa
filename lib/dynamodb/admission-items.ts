/** The admission table's items read back: an entry, a summary row and the waiting names, each attribute of a wrong type read as absent. */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import * as z from "zod";
import type { AdmissionEntry, AdmissionState, AdmissionSummaryRow } from "../ports/admission-entry";
import type { WaitingName } from "../ports/admission-store";
import type { AdmissionSource } from "../ports/host-work";
import { readItem } from "./expression";

/** An optional attribute of a wrong type is read as absent, as a missing one is. */
const optionalNumber = z.number().optional().catch(undefined);
const optionalString = z.string().optional().catch(undefined);
/** Read as stored, as the registry wrote it; an item without one is still queued. */
const STATE = z
  .string()
  .catch("queued")
  .default("queued")
  .transform((state) => state as AdmissionState);

/** Credentials' expiry is read only whole: a known kind with its expiry. */
const EXPIRY = {
  credentialsExpireAt: optionalNumber,
  expiryKind: z.enum(["certificate", "server_jwt"]).optional().catch(undefined),
  credentialsIssuedAt: optionalNumber,
  credentialId: optionalString,
};

const RENEWAL_MARK = { renewalAttempts: optionalNumber, renewalRetryAt: optionalNumber, renewalError: optionalString, renewalErrorAt: optionalNumber };

/** The provisioning JWT a node presented; read whole, as `expiryOf` reads the credentials (dropped by `provisioningJwtOf` otherwise). */
const PROVISIONING_JWT = { provisioningJwtIssuer: optionalString, provisioningJwtExpiresAt: optionalNumber };

/** What both an entry and a summary row carry of the last failure, the credentials, renewal's mark on them, the presented provisioning JWT and a quarantine. */
const OUTCOME = {
  lastError: optionalString,
  lastErrorAt: optionalNumber,
  failedStep: optionalString,
  failures: optionalNumber,
  ...EXPIRY,
  ...RENEWAL_MARK,
  ...PROVISIONING_JWT,
  quarantineReason: optionalString,
  quarantineEvidence: optionalString,
  quarantinedAt: optionalNumber,
};

type Expiry = Pick<AdmissionEntry, "credentialsExpireAt" | "expiryKind" | "credentialsIssuedAt" | "credentialId">;

function expiryOf({ credentialsExpireAt, expiryKind, credentialsIssuedAt, credentialId }: { [K in keyof Expiry]?: Expiry[K] }): Expiry {
  if (credentialsExpireAt === undefined || expiryKind === undefined) return {};
  return { credentialsExpireAt, expiryKind, ...(credentialsIssuedAt === undefined ? {} : { credentialsIssuedAt }), ...(credentialId === undefined ? {} : { credentialId }) };
}

type PresentedJwt = Pick<AdmissionEntry, "provisioningJwtIssuer" | "provisioningJwtExpiresAt">;

function provisioningJwtOf({ provisioningJwtIssuer, provisioningJwtExpiresAt }: PresentedJwt): PresentedJwt {
  if (provisioningJwtIssuer === undefined || provisioningJwtExpiresAt === undefined) return {};
  return { provisioningJwtIssuer, provisioningJwtExpiresAt };
}

/** Leaves out the attributes that are absent, as the entry types want. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

const ENTRY = z
  .object({
    site: z.string().min(1),
    identity: z.string().min(1),
    term: z.number(),
    admittedAt: z.number(),
    source: z
      .string()
      .catch("discovery")
      .default("discovery")
      .transform((source) => source as AdmissionSource),
    state: STATE,
    expiresAt: z.number().catch(0).default(0),
    admissionId: optionalString,
    claimToken: optionalString,
    endedClaimToken: optionalString,
    claimedUntil: optionalNumber,
    heldUntil: optionalNumber,
    ...OUTCOME,
  })
  .transform(({ credentialsExpireAt, expiryKind, credentialsIssuedAt, credentialId, provisioningJwtIssuer, provisioningJwtExpiresAt, ...entry }): AdmissionEntry => ({
    ...defined(entry),
    ...expiryOf({ credentialsExpireAt, expiryKind, credentialsIssuedAt, credentialId }),
    ...provisioningJwtOf({ provisioningJwtIssuer, provisioningJwtExpiresAt }),
  }));

export const SUMMARY_ROW = z
  .object({
    identity: z.string().catch("").default(""),
    term: z.number().catch(0).default(0),
    state: STATE,
    claimedUntil: optionalNumber,
    ...OUTCOME,
  })
  .transform(({ credentialsExpireAt, expiryKind, credentialsIssuedAt, credentialId, provisioningJwtIssuer, provisioningJwtExpiresAt, ...row }): AdmissionSummaryRow => ({
    ...defined(row),
    ...expiryOf({ credentialsExpireAt, expiryKind, credentialsIssuedAt, credentialId }),
    ...provisioningJwtOf({ provisioningJwtIssuer, provisioningJwtExpiresAt }),
  }));

const WAITING_NAME = z.tuple([z.string().min(1), z.number(), z.number()]);
/** Each name as `[identity, firstSeen, lastSeen]`; one of another shape is skipped, as it would only be a name less to prefer. */
export const WAITING = z
  .object({ names: z.array(z.unknown()).catch([]).default([]) })
  .transform(({ names }): WaitingName[] =>
    names.flatMap((name) => {
      const parsed = WAITING_NAME.safeParse(name);
      return parsed.success ? [{ identity: parsed.data[0], firstSeen: parsed.data[1], lastSeen: parsed.data[2] }] : [];
    }),
  );

export function decodeEntry(item: Record<string, AttributeValue> | undefined): AdmissionEntry | undefined {
  return readItem(ENTRY, item);
}
