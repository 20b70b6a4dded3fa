/**
 * The merge rule of lib/admission/merge.ts: per host, which of two registries' entries the site
 * keeps, and that no credential expiry is lost. Items are plain values here; the rule never reads
 * them beyond what StoredHost decodes.
 */
import { describe, expect, it } from "vitest";
import { decideHostMerge, type StoredHost } from "../../../lib/admission/merge";

const NOW = Date.UTC(2025, 5, 1);
const DAY_MS = 86_400_000;
const OPTIONS = { now: NOW, lifetimeAttributes: ["expiresAt", "ttl"] };

/** A provisioned host's entry, credentials issued `issuedAt` and valid 90 days, kept as long; plus whatever `extra` holds. */
function provisioned(identity: string, issuedAt: number, extra: Record<string, unknown> = {}): StoredHost<unknown> {
  const expiresAt = issuedAt + 90 * DAY_MS;
  return {
    identity,
    attributes: {
      site: "lon",
      identity,
      state: "provisioned",
      credentialsExpireAt: expiresAt,
      expiryKind: "certificate",
      credentialsIssuedAt: issuedAt,
      expiresAt: expiresAt + 60_000,
      ttl: Math.ceil((expiresAt + 60_000) / 1000),
      ...extra,
    },
    credentials: { expiresAt, issuedAt },
    keptUntil: expiresAt + 60_000,
  };
}

/** An entry without credentials (queued or failed), kept `keptFor` from NOW. */
function withoutCredentials(identity: string, state: string, keptFor = 120_000, extra: Record<string, unknown> = {}): StoredHost<unknown> {
  return {
    identity,
    attributes: { site: "lon", identity, state, expiresAt: NOW + keptFor, ttl: Math.ceil((NOW + keptFor) / 1000), ...extra },
    keptUntil: NOW + keptFor,
  };
}

describe("the registry merge rule", () => {
  it("copies a host the target does not know, every attribute as stored", () => {
    // Arrange
    const source = provisioned("web1", NOW - DAY_MS, { renewalAttempts: 2, renewalError: "timeout" });

    // Act
    const decision = decideHostMerge(source, undefined, OPTIONS);

    // Assert
    expect(decision).toMatchObject({ action: "copy", reason: "absent" });
    expect(decision.write?.attributes).toEqual(source.attributes);
  });

  it("replaces the target's entry, whole, with the source's whose credentials were issued later", () => {
    // Arrange: the standby provisioned the host again after a failover; the target has a failure record the source has not.
    const target = provisioned("web1", NOW - 30 * DAY_MS, { lastError: "helper: exit 1" });
    const source = provisioned("web1", NOW - DAY_MS, { renewalAttempts: 1 });

    // Act
    const decision = decideHostMerge(source, target, OPTIONS);

    // Assert
    expect(decision).toMatchObject({ action: "replace", reason: "source-issued-later" });
    expect(decision.write?.attributes).toEqual(source.attributes);
  });

  it("keeps the target's entry when its credentials were issued later, and on a tie", () => {
    // Arrange
    const later = provisioned("web1", NOW - DAY_MS);
    const earlier = provisioned("web1", NOW - 30 * DAY_MS);

    // Act
    const newerTarget = decideHostMerge(earlier, later, OPTIONS);
    const tie = decideHostMerge(provisioned("web1", NOW - DAY_MS, { term: 9 }), later, OPTIONS);

    // Assert
    expect(newerTarget).toEqual({ action: "keep", reason: "target-issued-later" });
    expect(tie).toEqual({ action: "keep", reason: "same-issue" });
  });

  it("lets a provisioned host with known credentials beat an entry without them, either way round", () => {
    // Arrange
    const known = provisioned("web1", NOW - DAY_MS);
    const failed = withoutCredentials("web1", "failed", 120_000, { lastError: "rpc timeout" });

    // Act
    const intoFailed = decideHostMerge(known, failed, OPTIONS);
    const fromFailed = decideHostMerge(failed, known, OPTIONS);

    // Assert
    expect(intoFailed).toMatchObject({ action: "replace", write: known });
    expect(fromFailed).toEqual({ action: "keep", reason: "target-issued-later" });
  });

  it("fills in the expiry of a target entry without one from a source entry recorded before issue times were", () => {
    // Arrange: the source's credentials have no issue time, so neither entry wins; the target is kept.
    const source = provisioned("web1", NOW - DAY_MS);
    delete (source.attributes as Record<string, unknown>).credentialsIssuedAt;
    source.credentials = { expiresAt: source.credentials!.expiresAt };
    const target = withoutCredentials("web1", "queued", 120_000, { admissionId: "a-1", lastError: "no reply" });

    // Act
    const decision = decideHostMerge(source, target, OPTIONS);

    // Assert: the target's own attributes stay; the expiry and how long the item is kept come from the source.
    expect(decision).toMatchObject({ action: "fill-expiry", reason: "target-has-no-expiry" });
    expect(decision.write?.attributes).toEqual({
      ...target.attributes,
      credentialsExpireAt: source.attributes.credentialsExpireAt,
      expiryKind: "certificate",
      expiresAt: source.attributes.expiresAt,
      ttl: source.attributes.ttl,
    });
    expect(decision.write?.credentials).toEqual(source.credentials);
    expect(decision.write?.keptUntil).toBe(source.keptUntil);
  });

  it("never replaces an entry a worker is provisioning: the source's later expiry is filled in and the claim kept", () => {
    // Arrange
    const target = provisioned("web1", NOW - 30 * DAY_MS, { state: "provisioning", claimToken: "c-1", claimedUntil: NOW + 60_000 });
    target.claimedUntil = NOW + 60_000;
    const source = provisioned("web1", NOW - DAY_MS);

    // Act
    const decision = decideHostMerge(source, target, OPTIONS);

    // Assert
    expect(decision).toMatchObject({ action: "fill-expiry", reason: "target-claimed" });
    expect(decision.write?.attributes).toMatchObject({ state: "provisioning", claimToken: "c-1", credentialsIssuedAt: NOW - DAY_MS });
    expect(decision.write?.credentials).toEqual(source.credentials);
  });

  it("replaces an entry whose claim has run out like any other", () => {
    // Arrange
    const target = provisioned("web1", NOW - 30 * DAY_MS, { state: "provisioning", claimToken: "c-1", claimedUntil: NOW - 1 });
    target.claimedUntil = NOW - 1;
    const source = provisioned("web1", NOW - DAY_MS);

    // Act
    const decision = decideHostMerge(source, target, OPTIONS);

    // Assert
    expect(decision).toMatchObject({ action: "replace", write: source });
  });

  it("decides nothing more once merged: each written entry is kept when merged again", () => {
    // Arrange: every kind of pair the rule writes for.
    const legacy = provisioned("web1", NOW - DAY_MS);
    delete (legacy.attributes as Record<string, unknown>).credentialsIssuedAt;
    legacy.credentials = { expiresAt: legacy.credentials!.expiresAt };
    const claimed = provisioned("web1", NOW - 30 * DAY_MS, { claimToken: "c-1", claimedUntil: NOW + 60_000 });
    claimed.claimedUntil = NOW + 60_000;
    const pairs: Array<[StoredHost<unknown>, StoredHost<unknown> | undefined]> = [
      [provisioned("web1", NOW - DAY_MS), undefined],
      [provisioned("web1", NOW - DAY_MS), provisioned("web1", NOW - 30 * DAY_MS)],
      [legacy, withoutCredentials("web1", "queued")],
      [provisioned("web1", NOW - DAY_MS), claimed],
    ];

    // Act
    const again = pairs.map(([source, target]) => decideHostMerge(source, decideHostMerge(source, target, OPTIONS).write, OPTIONS));

    // Assert
    expect(again.map((decision) => decision.action)).toEqual(["keep", "keep", "keep", "keep"]);
  });
});
