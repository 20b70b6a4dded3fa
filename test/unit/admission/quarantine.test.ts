import { describe, expect, it } from "vitest";
import { encodeEvidence, quarantinedHosts } from "../../../lib/admission/quarantine";

/** The bound docs/audit.md states for the evidence text. */
const EVIDENCE_MAX_LENGTH = 2_000;

/** The senders of stored evidence, as status and the CLI read them back. */
const decodeEvidence = (text: string) => quarantinedHosts([{ identity: "x.example.net", term: 1, state: "quarantined", quarantineEvidence: text }])[0]!.senders;
import { uniquenessProblem } from "../../../lib/choria/identity";

describe("identities that cannot tell one machine from another", () => {
  it.each(["localhost", "LOCALHOST", "localhost.localdomain", "localhost.example.net", "web12", "node-1"])("%s cannot be unique", (identity) => {
    expect(uniquenessProblem(identity)).toEqual(expect.any(String));
  });

  it.each(["web12.example.net", "n1.scale-v2.real.example.net", "mylocalhost.example.net"])("%s can", (identity) => {
    expect(uniquenessProblem(identity)).toBeUndefined();
  });

  it("admits a short name only with allow_short_identities, and localhost never", () => {
    expect(uniquenessProblem("web12", true)).toBeUndefined();
    expect(uniquenessProblem("localhost", true)).toMatch(/localhost/);
    expect(uniquenessProblem("web12")).toMatch(/no domain part.*allow_short_identities/);
  });
});

describe("the quarantine's evidence", () => {
  it("keeps what it can within its bound and counts the senders it left out", () => {
    // Arrange
    const senders = Array.from({ length: 20 }, (_, index) => ({ ecdh: `${index}`.padStart(16, "0"), note: "x".repeat(500) }));

    // Act
    const text = encodeEvidence(senders);

    // Assert
    expect(text.length).toBeLessThanOrEqual(EVIDENCE_MAX_LENGTH);
    const decoded = decodeEvidence(text);
    const more = decoded.at(-1) as { more: number };
    expect(decoded.length - 1 + more.more).toBe(20);
    expect(decoded[0]).toEqual({ ecdh: "0000000000000000", note: "x".repeat(200) });
  });

  it("reads back the senders and lists the quarantined hosts of a listing, the latest first", () => {
    // Arrange
    const evidence = encodeEvidence([{ ecdh: "a1" }, { ecdh: "b2" }]);
    const rows = [
      { identity: "old.example.net", term: 1, state: "quarantined" as const, quarantineReason: "two", quarantinedAt: 1, quarantineEvidence: evidence },
      { identity: "ok.example.net", term: 1, state: "provisioned" as const },
      { identity: "new.example.net", term: 1, state: "quarantined" as const, quarantineReason: "short", quarantinedAt: 2, quarantineEvidence: "not json" },
    ];

    // Act
    const hosts = quarantinedHosts(rows);

    // Assert
    expect(hosts).toEqual([
      { identity: "new.example.net", reason: "short", quarantinedAt: 2, senders: [{ evidence: "not json" }] },
      { identity: "old.example.net", reason: "two", quarantinedAt: 1, senders: [{ ecdh: "a1" }, { ecdh: "b2" }] },
    ]);
  });
});
