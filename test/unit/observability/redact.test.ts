import { describe, expect, it } from "vitest";
import { REDACTED, Redactor, isSecretAttributeName } from "../../../lib/observability/redact";

describe("isSecretAttributeName", () => {
  it.each(["token", "natsToken", "nats_token", "broker_provisioning_password", "jwt", "client_seed", "signingKey", "key", "secret", "Authorization", "private-key", "apiKey"])(
    "%s is a secret",
    (name) => {
      // Act
      const secret = isSecretAttributeName(name);

      // Assert
      expect(secret).toBe(true);
    },
  );

  it.each(["identity", "rpc", "site", "keyboard", "monkey", "term", "attempt", "statusmsg"])("%s is not", (name) => {
    // Act
    const secret = isSecretAttributeName(name);

    // Assert
    expect(secret).toBe(false);
  });
});

describe("Redactor", () => {
  it("masks secret-named attributes at any depth, keeps the rest", () => {
    // Arrange
    const redactor = new Redactor();

    // Act
    const result = redactor.attributes({
      identity: "n1",
      token: "abc",
      nested: { list: [{ password: "pw", ok: 1 }], clientSeed: "seed" },
      emptyToken: "",
    });

    // Assert
    expect(result).toEqual({
      identity: "n1",
      token: REDACTED,
      nested: { list: [{ password: REDACTED, ok: 1 }], clientSeed: REDACTED },
      emptyToken: "",
    });
  });

  it("masks known secret values wherever they appear, including error messages", () => {
    // Arrange
    const redactor = new Redactor(["s3cr3t-value-99"]);
    const error = new Error("connect failed with s3cr3t-value-99", { cause: new Error("inner s3cr3t-value-99") });

    // Act
    const text = JSON.stringify(redactor.attributes({ note: "token is s3cr3t-value-99!", error }));

    // Assert
    expect(text).not.toContain("s3cr3t-value-99");
    expect(text).toContain("connect failed with [redacted]");
  });

  it("uses toJSON (a redacting config) and survives cycles", () => {
    // Arrange
    const cyclic: Record<string, unknown> = { name: "loop" };
    cyclic.self = cyclic;
    const config = { toJSON: () => ({ token: "[redacted]", site: "lon" }), token: "raw-secret" };

    // Act
    const result = new Redactor().attributes({ config, cyclic });

    // Assert
    expect(JSON.stringify(result)).not.toContain("raw-secret");
    expect(result).toEqual({ config: { token: REDACTED, site: "lon" }, cyclic: { name: "loop", self: "[truncated]" } });
  });
});
