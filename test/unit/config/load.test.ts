import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../../lib/config/load";
import { parseSecretReference, type SecretReference, type SecretResolver } from "../../../lib/config/secrets";
import { ConfigError } from "../../../lib/errors";

const BASE_YAML = `
helper: /usr/local/bin/helper --site "lon 1"
broker_urls:
  - nats://broker.example.net:4222
site: lon
interval: 5m
features:
  jwt: true
`;

class MapResolver implements SecretResolver {
  readonly calls: SecretReference[] = [];
  constructor(private readonly values: Record<string, string>) {}
  async resolve(reference: SecretReference): Promise<string> {
    this.calls.push(reference);
    const value = this.values[`${reference.store}:${reference.name}`];
    if (value === undefined) throw new Error(`no such secret ${reference.name}`);
    return value;
  }
}

async function rejection(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (error instanceof ConfigError) return error;
  throw new Error(`expected a ConfigError, got ${String(error)}`);
}

describe("loadConfig", () => {
  let dir: string;
  let file: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "provisioner-config-"));
    file = join(dir, "provisioner.yaml");
    await writeFile(file, BASE_YAML);
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads the YAML file named by PROVISIONER_CONFIG", async () => {
    // Act
    const config = await loadConfig({ env: { PROVISIONER_CONFIG: file } });

    // Assert
    expect(config.site).toBe("lon");
    expect(config.intervalMs).toBe(5 * 60_000);
    expect(config.features.jwt).toBe(true);
    expect(config.helper).toBe('/usr/local/bin/helper --site "lon 1"');
  });

  it("reads inline YAML from PROVISIONER_CONFIG_YAML, overriding the file key by key", async () => {
    // Act
    const config = await loadConfig({ file, env: { PROVISIONER_CONFIG_YAML: "site: fra\nleader_election: yes\ndeployment_id: fra-1\n" } });

    // Assert
    expect(config.site).toBe("fra");
    expect(config.intervalMs).toBe(5 * 60_000);
    expect(config.leaderElection).toBe(true);
  });

  it("applies PROVISIONER_<KEY> overrides of top-level scalars with their types", async () => {
    // Act
    const config = await loadConfig({
      file,
      env: {
        PROVISIONER_SITE: "ams",
        PROVISIONER_WORKERS: "3",
        PROVISIONER_LEADER_ELECTION: "true",
        PROVISIONER_DEPLOYMENT_ID: "ams-1",
        PROVISIONER_BROKER_URLS: "nats://a.example.net:4222, tls://b.example.net:4443",
        PROVISIONER_RPC_TTL: "90",
      },
    });

    // Assert
    expect(config.site).toBe("ams");
    expect(config.workers).toBe(3);
    expect(config.leaderElection).toBe(true);
    expect(config.brokerUrls).toEqual(["nats://a.example.net:4222", "tls://b.example.net:4443"]);
    expect(config.rpcTtl).toBe(90);
  });

  it.each([
    ["PROVISIONER_WORKERS", "many", "workers"],
    ["PROVISIONER_LEADER_ELECTION", "maybe", "leader_election"],
    ["PROVISIONER_INTERVAL", "10s", "interval"],
  ])("an invalid override %s=%s names the key %s", async (name, value, key) => {
    // Act
    const error = await rejection(loadConfig({ file, env: { [name]: value } }));

    // Assert
    expect(error.key).toBe(key);
  });

  it("fails when no configuration source is given", async () => {
    // Act
    const error = await rejection(loadConfig({ env: {} }));

    // Assert
    expect(error.message).toContain("PROVISIONER_CONFIG");
  });

  it("fails clearly on a missing file and on invalid YAML", async () => {
    // Arrange
    const broken = join(dir, "broken.yaml");
    await writeFile(broken, "helper: [unclosed\n");

    // Act
    const missing = await rejection(loadConfig({ file: join(dir, "absent.yaml"), env: {} }));
    const invalid = await rejection(loadConfig({ file: broken, env: {} }));

    // Assert
    expect(missing.message).toContain("could not be read");
    expect(invalid.message).toContain("not valid YAML");
  });

  it("resolves ssm: and secretsmanager: references through the injected resolver", async () => {
    // Arrange
    const resolver = new MapResolver({
      "ssm:/provisioner/token": "resolved-token-value",
      "secretsmanager:provisioner/broker": "resolved-password-value",
      "ssm:/provisioner/signing-key": "5e".repeat(32),
      "secretsmanager:nats": "resolved-nats-token",
    });
    const yaml = [
      "token: ssm:/provisioner/token",
      "broker_provisioning_password: secretsmanager:provisioner/broker",
      "jwt_signing_key: ssm:/provisioner/signing-key",
      "nats_token: secretsmanager:nats",
    ].join("\n");

    // Act
    const config = await loadConfig({ file, secrets: resolver, env: { PROVISIONER_CONFIG_YAML: yaml } });

    // Assert
    expect(config.token).toBe("resolved-token-value");
    expect(config.brokerProvisioningPassword).toBe("resolved-password-value");
    expect(config.jwtSigningKey).toBe("5e".repeat(32));
    expect(config.natsToken).toBe("resolved-nats-token");
    expect(resolver.calls).toHaveLength(4);
    expect(JSON.stringify(config)).not.toContain("resolved-");
  });

  it("resolves a reference given through an environment override (client_seed)", async () => {
    // Arrange
    const resolver = new MapResolver({ "ssm:/seed": "5eed".repeat(16), "ssm:/jwt": "a.b.c" });

    // Act
    const config = await loadConfig({
      file,
      secrets: resolver,
      env: { PROVISIONER_PROTOCOL_VERSION: "2", PROVISIONER_CLIENT_SEED: "ssm:/seed", PROVISIONER_CLIENT_JWT: "ssm:/jwt" },
    });

    // Assert
    expect(config.clientSeed).toBe("5eed".repeat(16));
    expect(config.clientJwt).toBe("a.b.c");
  });

  it("a failing resolver is a ConfigError naming the key and the reference, not a value", async () => {
    // Arrange
    const resolver = new MapResolver({});

    // Act
    const error = await rejection(
      loadConfig({ file, secrets: resolver, env: { PROVISIONER_TOKEN: "ssm:/missing/token" } }),
    );

    // Assert
    expect(error.key).toBe("token");
    expect(error.message).toContain("ssm:/missing/token");
  });

  it("a reference without a resolver is a ConfigError", async () => {
    // Act
    const error = await rejection(loadConfig({ file, env: { PROVISIONER_NATS_TOKEN: "secretsmanager:nats" } }));

    // Assert
    expect(error.key).toBe("nats_token");
  });

  it("resolves key and certificate settings (tls.*, jwt_verify_cert) and redacts tls.key", async () => {
    // Arrange
    const resolver = new MapResolver({
      "ssm:/tls/ca": "-----BEGIN CERTIFICATE-----ca",
      "ssm:/tls/cert": "-----BEGIN CERTIFICATE-----cert",
      "secretsmanager:tls/key": "-----BEGIN PRIVATE KEY-----key",
      "ssm:/jwt/verify": "-----BEGIN CERTIFICATE-----verify",
    });
    const yaml = [
      "jwt_verify_cert: ssm:/jwt/verify",
      "tls:",
      "  ca: ssm:/tls/ca",
      "  cert: ssm:/tls/cert",
      "  key: secretsmanager:tls/key",
      "  insecure_skip_verify: true",
    ].join("\n");

    // Act
    const config = await loadConfig({ file, secrets: resolver, env: { PROVISIONER_CONFIG_YAML: yaml } });

    // Assert
    expect(config.tls).toMatchObject({ ca: "-----BEGIN CERTIFICATE-----ca", cert: "-----BEGIN CERTIFICATE-----cert", insecureSkipVerify: true });
    expect(config.tls.key).toBe("-----BEGIN PRIVATE KEY-----key");
    expect(config.jwtVerifyCert).toBe("-----BEGIN CERTIFICATE-----verify");
    expect(JSON.stringify(config)).not.toContain("PRIVATE KEY");
  });

  it("resolves only the references of the given function", async () => {
    // Arrange
    const resolver = new MapResolver({ "secretsmanager:broker": "broker-password" });
    const yaml = ["token: ssm:/token", "broker_provisioning_password: secretsmanager:broker", "jwt_signing_key: ssm:/key"].join("\n");

    // Act
    const config = await loadConfig({ file, secrets: resolver, function: "discover", env: { PROVISIONER_CONFIG_YAML: yaml } });

    // Assert
    expect(resolver.calls.map((c) => c.name)).toEqual(["broker"]);
    expect(config.brokerProvisioningPassword).toBe("broker-password");
    expect(config.token).toBe("ssm:/token");
    expect(config.jwtSigningKey).toBe("ssm:/key");
  });

  it("does not treat non-secret keys as references", async () => {
    // Arrange
    const resolver = new MapResolver({});

    // Act
    const config = await loadConfig({ file, secrets: resolver, env: { PROVISIONER_IDENTITY: "ssm:/not-a-secret" } });

    // Assert
    expect(config.identity).toBe("ssm:/not-a-secret");
    expect(resolver.calls).toHaveLength(0);
  });
});

describe("parseSecretReference", () => {
  it.each([
    ["ssm:/a/b", { store: "ssm", name: "/a/b" }],
    ["secretsmanager:arn:aws:secretsmanager:eu-west-1:1:secret:x", { store: "secretsmanager", name: "arn:aws:secretsmanager:eu-west-1:1:secret:x" }],
    ["plain-token", undefined],
    ["ssm:", undefined],
  ])("%s", (text, expected) => {
    // Act
    const reference = parseSecretReference(text);

    // Assert
    expect(reference).toEqual(expected);
  });
});
