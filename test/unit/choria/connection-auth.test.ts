/**
 * How a protocol v2 client authenticates to the broker: a go-choria broker that checks client JWTs
 * admits one only with the connection nonce signed by the JWT's key (go-choria's own clients send
 * that signature). The CONNECT fields nats.js would send are built here from the configuration.
 */
import { verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { brokerSettings } from "../../../lib/aws/choria-client";
import { connectionOptions } from "../../../lib/nats/connection-options";
import { parseConfig } from "../../../lib/config/config";
import { decodeHex, encodeHex } from "../../../lib/crypto/encoding";
import { ed25519PublicKeyFromRaw } from "../../../lib/crypto/keys";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";

const BASE = { helper: "/bin/true", token: "t", broker_urls: ["nats://127.0.0.1:4222"], choria_insecure: true };
const CLIENT_JWT = "eyJhbGciOiJFZERTQSJ9.eyJjYWxsZXJpZCI6InByb3Zpc2lvbmVyIn0.c2ln";

describe("the broker connection's authentication", () => {
  it("with protocol v2, presents the client JWT and signs the broker's nonce with the client seed", async () => {
    // Arrange
    const seed = generateEd25519Seed();
    const key = ed25519SigningKey(seed);
    const config = parseConfig({ ...BASE, protocol_version: 2, client_jwt: CLIENT_JWT, client_seed: encodeHex(seed) });
    const options = connectionOptions(await brokerSettings(config, "auth-test"));
    const nonce = "pCVsCqbvT8rObdg";

    // Act
    const authenticator = options.authenticator as (nonce?: string) => { jwt?: string; sig?: string };
    const auth = authenticator(nonce);

    // Assert: the signature go-choria's broker checks (ed25519 over the nonce's bytes, base64url without padding).
    expect(options.token).toBe(CLIENT_JWT);
    expect(auth.jwt).toBe(CLIENT_JWT);
    expect(auth.sig).toMatch(/^[A-Za-z0-9_-]+$/);
    const publicKey = ed25519PublicKeyFromRaw(decodeHex(key.alg === "EdDSA" ? key.publicKeyHex : ""));
    expect(verify(null, Buffer.from(nonce), publicKey, Buffer.from(auth.sig!, "base64url"))).toBe(true);
    expect(JSON.stringify(auth)).not.toContain(encodeHex(seed));
  });

  it("with protocol v1, or an explicit nats_token, signs no nonce", async () => {
    // Arrange
    const seed = encodeHex(generateEd25519Seed());
    const v1 = connectionOptions(await brokerSettings(parseConfig(BASE), "auth-test"));
    const withToken = connectionOptions(
      await brokerSettings(parseConfig({ ...BASE, protocol_version: 2, client_jwt: CLIENT_JWT, client_seed: seed, nats_token: "opaque" }), "auth-test"),
    );

    // Assert
    expect(v1.authenticator).toBeUndefined();
    expect(withToken.authenticator).toBeUndefined();
    expect(withToken.token).toBe("opaque");
  });
});
