import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadEngineKeys } from "../../../lib/aws/choria-client";
import { loadConfig } from "../../../lib/config/load";
import type { SecretResolver } from "../../../lib/config/secrets";
import { addChainIssuerData, buildServerClaims } from "../../../lib/crypto/server-jwt";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { encodeHex } from "../../../lib/crypto/encoding";
import { mintChainIssuerToken } from "../../support/choria-node/server-jwt";
import { ConfigError } from "../../../lib/errors";

const seed = generateEd25519Seed();
const signingKey = ed25519SigningKey(seed);
const signingPublicHex = signingKey.alg === "EdDSA" ? signingKey.publicKeyHex : "";

async function chainToken(): Promise<string> {
  return mintChainIssuerToken({
    orgIssuer: ed25519SigningKey(generateEd25519Seed()),
    chainPublicKeyHex: signingPublicHex,
    exp: Math.floor(Date.now() / 1000) + 3600,
  });
}

function yaml(keys: Record<string, string>): string {
  return [
    "helper: /bin/true",
    "broker_urls: [nats://127.0.0.1:4222]",
    "features: { ed25519: true }",
    ...Object.entries(keys).map(([key, value]) => `${key}: ${JSON.stringify(value)}`),
  ].join("\n");
}

describe("loadEngineKeys: jwt_signing_token", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "engine-keys-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // The Go provisioner's generateServerJWT does os.ReadFile(jwt_signing_token) and parses the content
  // as is: the key names a file, like jwt_signing_key.
  it("reads a Go-style file path, a trailing newline included, and the chain data signs with it", async () => {
    const token = await chainToken();
    const tokenFile = join(dir, "provisioner.jwt");
    const seedFile = join(dir, "provisioner.seed");
    await writeFile(tokenFile, `${token}\n`);
    await writeFile(seedFile, encodeHex(seed));
    const config = await loadConfig({ env: { PROVISIONER_CONFIG_YAML: yaml({ jwt_signing_key: seedFile, jwt_signing_token: tokenFile }) } });

    const keys = await loadEngineKeys(config);

    expect(keys.signingToken).toBe(`${token}\n`);
    const claims = buildServerClaims({ identity: "n1.example.net", publicKeyHex: signingPublicHex, collectives: ["choria"], validityMs: 3_600_000, now: new Date() });
    expect(addChainIssuerData(claims, keys.signingToken ?? "", keys.signingKey ?? signingKey).iss).toMatch(/^C-/);
  });

  it("keeps a value resolved from a secret store as the token itself", async () => {
    const token = await chainToken();
    const secrets: SecretResolver = { resolve: () => Promise.resolve(token) };
    const config = await loadConfig({
      env: { PROVISIONER_CONFIG_YAML: yaml({ jwt_signing_key: encodeHex(seed), jwt_signing_token: "ssm:/provisioner/signing-token" }) },
      secrets,
    });

    expect((await loadEngineKeys(config)).signingToken).toBe(token);
  });

  it("names the key and the path, never a token, when the file cannot be read", async () => {
    const missing = join(dir, "absent.jwt");
    const config = await loadConfig({ env: { PROVISIONER_CONFIG_YAML: yaml({ jwt_signing_key: encodeHex(seed), jwt_signing_token: missing }) } });

    const error = await loadEngineKeys(config).catch((failure: unknown) => failure);

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/jwt_signing_token/);
    expect((error as ConfigError).message).toContain(missing);
  });

  it("is not read unless features.ed25519 signs server JWTs", async () => {
    const config = await loadConfig({
      env: { PROVISIONER_CONFIG_YAML: yaml({ jwt_signing_token: join(dir, "absent.jwt") }).replace("ed25519: true", "jwt: true") },
    });

    expect((await loadEngineKeys(config)).signingToken).toBeUndefined();
  });
});
