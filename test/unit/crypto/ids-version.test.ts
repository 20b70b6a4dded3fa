import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareVersions } from "../../../lib/crypto/version";
import { ksuid, replySubjectHash, uuidHex } from "../../../lib/crypto/ids";
import { ksuidTime, parseKsuid } from "../../support/choria-node/ksuid";

describe("ksuid", () => {
  it("round-trips its whole-second time for any date in range", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1_400_000_000, max: 1_400_000_000 + 0xffff_ffff }), fc.uint8Array({ minLength: 16, maxLength: 16 }), (seconds, random) => {
        const id = ksuid(new Date(seconds * 1000 + 999), random);

        expect(id).toMatch(/^[0-9A-Za-z]{27}$/);
        expect(ksuidTime(id).getTime()).toBe(seconds * 1000);
        expect(Buffer.from(parseKsuid(id).subarray(4))).toEqual(Buffer.from(random));
      }),
      { numRuns: 200 },
    );
  });

  it("pads the smallest value with zeros", () => {
    expect(ksuid(new Date(1_400_000_000_000), new Uint8Array(16))).toBe("0".repeat(27));
  });

  it("rejects times outside the KSUID range and payloads of the wrong size", () => {
    expect(() => ksuid(new Date(1_399_999_999_000))).toThrow(RangeError);
    expect(() => ksuid(new Date((1_400_000_000 + 0x1_0000_0000) * 1000))).toThrow(RangeError);
    expect(() => ksuid(new Date(), new Uint8Array(15))).toThrow(/16 bytes/);
  });

  it("refuses malformed ids", () => {
    expect(() => ksuidTime("short")).toThrow(/invalid ksuid/);
    expect(() => ksuidTime(`${"0".repeat(26)}!`)).toThrow(/invalid ksuid/);
    expect(() => ksuidTime("z".repeat(27))).toThrow(/invalid ksuid/);
  });

  it("makes a fresh random id each time", () => {
    const now = new Date();

    expect(ksuid(now)).not.toBe(ksuid(now));
  });
});

describe("uuidHex and replySubjectHash", () => {
  it("uuidHex is 32 lowercase hex of a v4 UUID", () => {
    const id = uuidHex();

    expect(id).toMatch(/^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    expect(uuidHex()).not.toBe(id);
  });

  it("replySubjectHash is the md5 hex of the callerid", () => {
    expect(replySubjectHash("")).toBe("d41d8cd98f00b204e9800998ecf8427e");
    expect(replySubjectHash("choria=a")).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe("compareVersions", () => {
  it.each([
    ["1.0~rc1", "1.0", -1],
    ["2.0.1a", "2.0.1", 1],
    ["5.5p10", "5.5p1", 1],
    ["1.0", "1_0", 0],
    ["010", "10", 0],
    ["0.28.0", "0.28.0-1", -1],
    ["1:1.0", "2.0", 1],
    ["0.29.4", "0.30.0", -1],
    ["0.30.0", "0.30.0", 0],
    ["1.0a", "1.0", 1],
    ["1.0", "1.0.0", -1],
    ["1.0~rc1", "1.0~rc2", -1],
    ["1.0~", "1.0", -1],
    ["1.0-2", "1.0-10", -1],
    ["x:1.0", "1.0", 0],
    ["a", "1", -1],
  ] as const)("%s vs %s is %i", (a, b, expected) => {
    expect(compareVersions(a, b)).toBe(expected);
    expect(compareVersions(b, a)).toBe(-expected || 0);
  });

  it("is antisymmetric and reflexive", () => {
    const version = fc.stringMatching(/^([0-9]:)?[0-9a-z.~_]{0,8}(-[0-9a-z.~]{0,4})?$/);
    fc.assert(
      fc.property(version, version, (a, b) => {
        expect(compareVersions(a, a)).toBe(0);
        expect(compareVersions(a, b)).toBe(-compareVersions(b, a) || 0);
      }),
      { numRuns: 500 },
    );
  });

  it("rpmvercmp treats separators as equal only when the segments match", () => {
    // Through compareVersions: "0-<x>" puts <x> in the release (only the first dash splits), and a
    // version without dash or epoch is the version itself, so each line is one rpmvercmp.
    expect(compareVersions("0-1.2", "0-1-2")).toBe(0);
    expect(compareVersions("", "1")).toBe(-1);
    expect(compareVersions("~", "")).toBe(-1);
    expect(compareVersions("", "~")).toBe(1);
  });
});
