import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBase64Url, decodeHex, encodeBase64Url, encodeHex } from "../../../lib/crypto";

describe("strict codecs", () => {
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
    expect(decodeHex("ABcd")).toEqual(Uint8Array.of(0xab, 0xcd));
  });
});
