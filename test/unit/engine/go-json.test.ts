import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeGoJson } from "../../../lib/engine/go-json";
import { goDuration } from "../../../lib/engine/go-duration";

describe("encodeGoJson", () => {
  it("sorts keys bytewise at every level, integer-like keys included, and keeps array order", () => {
    // Arrange
    const value = { b: [{ z: 1, a: 2 }], "9": true, "10": null, a: { y: "x", "é": 1, Z: 0 } };

    // Act
    const text = encodeGoJson(value);

    // Assert
    expect(text).toBe('{"10":null,"9":true,"a":{"Z":0,"y":"x","é":1},"b":[{"a":2,"z":1}]}');
  });

  it("escapes HTML characters and line separators as Go does", () => {
    // Act
    const text = encodeGoJson({ fact: "<a href='x'>&\u2028\u2029</a>" });

    // Assert
    expect(text).toBe('{"fact":"\\u003ca href=\'x\'\\u003e\\u0026\\u2028\\u2029\\u003c/a\\u003e"}');
  });

  it("round-trips any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // Act
        const decoded = JSON.parse(encodeGoJson(value));

        // Assert
        expect(decoded).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });
});

describe("goDuration", () => {
  it("prints durations the way Go's time.Duration does", () => {
    // Act
    const printed = [0, 250, 1_500, 60_000, 125_300, 3_726_000].map(goDuration);

    // Assert
    expect(printed).toEqual(["0s", "250ms", "1.5s", "1m0s", "2m5.3s", "1h2m6s"]);
  });
});
