import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBase64Url, decodeHex, encodeBase64Url, encodeHex } from "../../../lib/crypto/encoding";

describe("strict codecs", () => {
  it("skip CR and LF anywhere in base64url, as Go's encoding/base64 does", () => {
    expect(Buffer.from(decodeBase64Url("YW\r\nJj\n")).toString()).toBe("abc");
    expect(Buffer.from(decodeBase64Url("\nYWJjZA\r")).toString()).toBe("abcd");
    expect(() => decodeBase64Url("YWJjZ\n")).toThrow(/illegal base64url/);
  });

  it("round-trip any bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expect(Buffer.from(decodeHex(encodeHex(bytes)))).toEqual(Buffer.from(bytes));
        expect(Buffer.from(decodeBase64Url(encodeBase64Url(bytes)))).toEqual(Buffer.from(bytes));
      }),
      { numRuns: 200 },
    );
  });

  it("reject what Go's decoders reject", () => {
    expect(() => decodeHex("abc")).toThrow(/odd length/);
    expect(() => decodeHex("zz")).toThrow(/invalid byte/);
    expect(() => decodeHex("ab\n")).toThrow(/odd length|invalid byte/);
    expect(() => decodeBase64Url("ab+/")).toThrow(/illegal base64url/);
    expect(() => decodeBase64Url("abc=")).toThrow(/illegal base64url/);
    expect(() => decodeBase64Url("abcde")).toThrow(/illegal base64url/);
    expect(() => decodeBase64Url("YWJj ")).toThrow(/illegal base64url/);
    expect(() => decodeBase64Url("YWJj\t")).toThrow(/illegal base64url/);
    expect(decodeHex("ABcd")).toEqual(Uint8Array.of(0xab, 0xcd));
  });
});
