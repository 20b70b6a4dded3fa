import { describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { decodeHelperResponse, encodeHelperRequest } from "../../../lib/helper/codec";
import type { HelperRequest } from "../../../lib/ports/helper";

const encoder = new TextEncoder();
const decode = (value: unknown) => decodeHelperResponse(encoder.encode(JSON.stringify(value)), "helper");

function helperErrorOf(action: () => unknown): HelperError {
  try {
    action();
  } catch (error) {
    if (error instanceof HelperError) return error;
    throw error;
  }
  throw new Error("expected a HelperError");
}

describe("encodeHelperRequest", () => {
  it("writes the keys in the Go daemon's order whatever order the object has", () => {
    // Arrange
    const request: HelperRequest = {
      jwt: { cht: "token" },
      inventory: '{"agents":[]}',
      ed25519_pubkey: null,
      csr: { csr: "PEM", public_key: "PUB", ssldir: "/ssl" },
      identity: "n1.example.net",
    };

    // Act
    const json = new TextDecoder().decode(encodeHelperRequest(request));

    // Assert
    expect(Object.keys(JSON.parse(json))).toEqual(["identity", "csr", "ed25519_pubkey", "inventory", "jwt"]);
  });
});

describe("decodeHelperResponse", () => {
  it("fills missing fields and JSON nulls with Go zero values", () => {
    // Act
    const response = decode({ configuration: { identity: "n1" }, msg: null });

    // Assert
    expect(response).toEqual({
      defer: false,
      shutdown: false,
      msg: "",
      configuration: { identity: "n1" },
      certificate: "",
      ca: "",
      key: "",
      ssldir: "",
      server_claims: null,
      action_policies: {},
      opa_policies: {},
      upgrade: "",
    });
  });

  it("keeps every field the helper set and ignores unknown ones", () => {
    // Arrange
    const body = {
      defer: false,
      shutdown: false,
      msg: "ok",
      configuration: { a: "1" },
      certificate: "CERT",
      ca: "CA",
      key: "KEY",
      ssldir: "/ssl",
      server_claims: { ou: "org", exp: 1900000000, collectives: ["c1"], pub_subjects: ["x.>"], permissions: { streams: true } },
      action_policies: { "rpcutil.policy": "policy default allow" },
      opa_policies: { "default.rego": "package choria" },
      upgrade: "0.29.4",
      extra: "ignored",
    };

    // Act
    const response = decode(body);

    // Assert
    const { extra: _extra, ...expected } = body;
    expect(response).toEqual(expected);
  });

  it("a JSON null document decodes to zero values, as Go's json.Unmarshal does", () => {
    // Act
    const response = decode(null);

    // Assert
    expect(response.configuration).toEqual({});
    expect(response.defer).toBe(false);
  });

  it.each<[unknown, string]>([
    [{ defer: "yes" }, "defer"],
    [{ shutdown: 1 }, "shutdown"],
    [{ msg: 5 }, "msg"],
    [{ configuration: { a: 1 } }, "configuration.a"],
    [{ configuration: ["a"] }, "configuration"],
    [{ certificate: {} }, "certificate"],
    [{ key: 1 }, "key"],
    [{ server_claims: { exp: "soon" } }, "server_claims.exp"],
    [{ server_claims: { collectives: "c1" } }, "server_claims.collectives"],
    [{ action_policies: { p: false } }, "action_policies.p"],
    [{ upgrade: 1.2 }, "upgrade"],
    [[1, 2], "(root)"],
  ])("names the wrong-typed field in %j", (body, field) => {
    // Act
    const error = helperErrorOf(() => decode(body));

    // Assert
    expect(error.message).toContain(`"${field}"`);
  });

  it("never quotes the output when it is not JSON", () => {
    // Arrange
    const output = encoder.encode("-----BEGIN PRIVATE KEY----- not json");

    // Act
    const error = helperErrorOf(() => decodeHelperResponse(output, "helper"));

    // Assert
    expect(error.message).toContain("not valid JSON");
    expect(error.message).not.toContain("PRIVATE KEY");
    expect(String(error.cause)).not.toContain("PRIVATE KEY");
  });

  it("zero bytes is an error", () => {
    // Act
    const error = helperErrorOf(() => decodeHelperResponse(new Uint8Array(), "helper"));

    // Assert
    expect(error.message).toContain("zero bytes");
  });
});
