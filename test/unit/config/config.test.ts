import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { DEFAULT_CERT_DENY_LIST } from "../../../lib/crypto/csr";
import { parseConfig } from "../../../lib/config/config";
import { secretValues } from "../../../lib/config/keys";
import { configErrorOf } from "../../support/config-errors";
import { RecordingLogger } from "../../support/fakes";

const MINUTE = 60_000;
/** client_seed is a hex ed25519 seed (32 bytes). */
const HEX_SEED = "0123456789abcdef".repeat(4);
const MINIMAL = { helper: "/usr/local/bin/helper", broker_urls: ["nats://broker.example.net:4222"] };

function parse(overrides: Record<string, unknown>, env: Record<string, string | undefined> = {}) {
  return parseConfig({ ...MINIMAL, ...overrides }, { env });
}

describe("parseConfig defaults", () => {
  it("applies the Go daemon's defaults and the serverless ones", () => {
    // Act
    const config = parse({ site: "lon" }, { AWS_REGION: "eu-west-2" });

    // Assert
    expect(config.workers).toBe(10);
    expect(config.intervalMs).toBe(MINUTE);
    expect(config.loglevel).toBe("info");
    expect(config.lifecycleComponent).toBe("provision_mode_server");
    expect(config.certDenyList).toEqual(["\\.privileged.mcollective$", "\\.privileged.choria$", "\\.mcollective$", "\\.choria$"]);
    expect(config.serverJwtValidityMs).toBe(365 * 24 * 60 * MINUTE);
    expect(config.features).toEqual({ pki: false, jwt: false, ed25519: false, upgrades: false });
    expect(config.leaderElection).toBe(false);
    expect(config.choriaInsecure).toBe(false);
    expect(config.protocolVersion).toBe(1);
    expect(config.helperTimeoutMs).toBe(10_000);
    expect(config.rpcTtl).toBe(30);
    expect(config.discoveryTimeoutMs).toBe(2_000);
    expect(config.discoveryNewNamesPerInterval).toBe(10_000);
    expect(config.provisioningJwtWarningMs).toBe(30 * 24 * 60 * MINUTE);
    expect(config.lease).toEqual({ durationMs: 30_000, keepIntervalMs: 10_000, skewBoundMs: 5_000, assumeSynchronizedClocks: false, peers: [] });
    expect(config.deploymentId).toBe("local");
    expect(config.identity).toBe("choria_provisioner.lon");
    expect(config.callerid).toBe("choria=choria_provisioner.lon");
    expect(config.token).toBeUndefined();
    expect(config.tls).toEqual({ ca: undefined, cert: undefined, key: undefined, insecureSkipVerify: false });
  });

  it("treats YAML nulls (`key:` with no value) as unset, as Go does", () => {
    // Act
    const config = parse({ interval: null, token: null, features: { pki: null } });

    // Assert
    expect(config.intervalMs).toBe(MINUTE);
    expect(config.token).toBeUndefined();
    expect(config.features.pki).toBe(false);
  });

  it("returns a frozen object", () => {
    // Act
    const config = parse({});

    // Assert
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.features)).toBe(true);
    expect(Object.isFrozen(config.brokerUrls)).toBe(true);
  });
});

describe("parseConfig accepts valid values for every key", () => {
  it.each<[string, unknown, (c: ReturnType<typeof parse>) => unknown, unknown]>([
    ["workers", 4, (c) => c.workers, 4],
    ["interval", "5m", (c) => c.intervalMs, 5 * MINUTE],
    ["interval", "1.5h", (c) => c.intervalMs, 90 * MINUTE],
    ["logfile", "/var/log/provisioner.log", (c) => c.logfile, "/var/log/provisioner.log"],
    ["loglevel", "debug", (c) => c.loglevel, "debug"],
    ["loglevel", "warn", (c) => c.loglevel, "warn"],
    ["loglevel", "error", (c) => c.loglevel, "error"],
    ["token", "s3cr3t-token", (c) => c.token, "s3cr3t-token"],
    ["lifecycle_component", "my_component", (c) => c.lifecycleComponent, "my_component"],
    ["choria_insecure", true, (c) => c.choriaInsecure, true],
    ["site", "fra1", (c) => c.site, "fra1"],
    ["monitor_port", 8080, (c) => c.monitorPort, 8080],
    ["broker_port", 4222, (c) => c.brokerPort, 4222],
    ["broker_provisioning_password", "pw-123456", (c) => c.brokerProvisioningPassword, "pw-123456"],
    ["cert_deny_list", ["/\\.evil$/", "bad"], (c) => c.certDenyList, ["/\\.evil$/", "bad"]],
    ["jwt_verify_cert", "/etc/provisioner/signer.pem", (c) => c.jwtVerifyCert, "/etc/provisioner/signer.pem"],
    ["jwt_signing_key", "/etc/provisioner/signer.seed", (c) => c.jwtSigningKey, "/etc/provisioner/signer.seed"],
    ["jwt_signing_token", "eyJhbGciOi.x.y", (c) => c.jwtSigningToken, "eyJhbGciOi.x.y"],
    ["server_jwt_validity", "30d", (c) => c.serverJwtValidityMs, 30 * 24 * 60 * MINUTE],
    ["rego_policy", "/etc/provisioner/policy.rego", (c) => c.regoPolicy, "/etc/provisioner/policy.rego"],
    ["leader_election", true, (c) => c.leaderElection, true],
    ["upgrades_repository", "https://repo.example.net/choria", (c) => c.upgradesRepository, "https://repo.example.net/choria"],
    ["upgrades_optional", true, (c) => c.upgradesOptional, true],
    ["features", { pki: true, jwt: true }, (c) => c.features, { pki: true, jwt: true, ed25519: false, upgrades: false }],
    ["broker_urls", ["nats://a.example.net:4222", "tls://b.example.net:4222"], (c) => c.brokerUrls, ["nats://a.example.net:4222", "tls://b.example.net:4222"]],
    ["identity", "provisioner.example.net", (c) => c.identity, "provisioner.example.net"],
    ["callerid", "choria=provisioner", (c) => c.callerid, "choria=provisioner"],
    ["protocol_version", 1, (c) => c.protocolVersion, 1],
    ["tls", { ca: "/ca.pem", cert: "/c.pem", key: "/k.pem", insecure_skip_verify: true }, (c) => c.tls, { ca: "/ca.pem", cert: "/c.pem", key: "/k.pem", insecureSkipVerify: true }],
    ["nats_token", "nats-tok-123", (c) => c.natsToken, "nats-tok-123"],
    ["deployment_id", "primary", (c) => c.deploymentId, "primary"],
    ["lease", { duration: "1m", renew_interval: "20s", skew_bound: "10s" }, (c) => c.lease, { durationMs: MINUTE, keepIntervalMs: 20_000, skewBoundMs: 10_000, assumeSynchronizedClocks: false, peers: [] }],
    ["lease", { peers: ["west"] }, (c) => c.lease.peers, ["west"]],
    ["lease", { skew_bound: "0s", assume_synchronized_clocks: true }, (c) => c.lease.skewBoundMs, 0],
    ["helper_timeout", "25s", (c) => c.helperTimeoutMs, 25_000],
    ["helper_timeout", "3s", (c) => c.helperTimeoutMs, 3_000],
    ["discovery_max_nodes", 500, (c) => c.discoveryMaxNodes, 500],
    ["discovery_new_names_per_interval", 25, (c) => c.discoveryNewNamesPerInterval, 25],
    ["rpc_ttl", 120, (c) => c.rpcTtl, 120],
    ["discovery_timeout", "1500ms", (c) => c.discoveryTimeoutMs, 1_500],
    ["provisioning_jwt_warning", "60d", (c) => c.provisioningJwtWarningMs, 60 * 24 * 60 * MINUTE],
  ])("%s: %j", (key, value, read, expected) => {
    // Act: as a deployed stack, which has a default deployment_id, of a site (leader_election needs one).
    const config = parse({ site: "lon", [key]: value }, { STACK_DEPLOYMENT_ID: "prod/eu-west-1/123456789012" });

    // Assert
    expect(read(config)).toEqual(expected);
  });

  it("helper_function replaces helper", () => {
    // Act
    const config = parseConfig({ broker_urls: MINIMAL.broker_urls, helper_function: "arn:aws:lambda:eu-west-1:1:function:helper" }, { env: {} });

    // Assert
    expect(config.helperFunction).toBe("arn:aws:lambda:eu-west-1:1:function:helper");
    expect(config.helper).toBeUndefined();
  });

  it("protocol_version 2 with client_jwt and client_seed", () => {
    // Act
    const config = parse({ protocol_version: 2, client_jwt: "a.b.c", client_seed: HEX_SEED });

    // Assert
    expect(config.protocolVersion).toBe(2);
    expect(config.clientJwt).toBe("a.b.c");
    expect(config.clientSeed).toBe(HEX_SEED);
  });

  it("features.ed25519 switches jwt on, as the Go daemon does", () => {
    // Act
    const config = parse({ features: { ed25519: true } });

    // Assert
    expect(config.features).toEqual({ pki: false, jwt: true, ed25519: true, upgrades: false });
  });

  it("features.upgrades with upgrades_repository", () => {
    // Act
    const config = parse({ features: { upgrades: true }, upgrades_repository: "https://repo" });

    // Assert
    expect(config.features.upgrades).toBe(true);
  });

  // The Go provisioner loads this and, at provision time, sends release_update with an empty
  // repository, carrying on when it fails because upgrades are optional.
  it("features.upgrades with upgrades_optional needs no upgrades_repository, as in Go", () => {
    // Act
    const config = parse({ features: { upgrades: true }, upgrades_optional: true });

    // Assert
    expect(config.features.upgrades).toBe(true);
    expect(config.upgradesRepository).toBeUndefined();
    expect(config.upgradesOptional).toBe(true);
  });

  it("an empty cert_deny_list falls back to the default list, as in Go", () => {
    // Act
    const config = parse({ cert_deny_list: [] });

    // Assert
    expect(config.certDenyList).toEqual(DEFAULT_CERT_DENY_LIST);
  });

  it("workers 0 means the default, 10 hosts an invocation, whatever the CPU count", () => {
    // Act
    const config = parse({ workers: 0 });

    // Assert
    expect(config.workers).toBe(10);
  });

  it("discovery_new_names_per_interval defaults to discovery_max_nodes, and a larger value is clamped to it", () => {
    // Act
    const byDefault = parse({ discovery_max_nodes: 2_500 });
    const smaller = parse({ discovery_max_nodes: 2_500, discovery_new_names_per_interval: 300 });
    const larger = parse({ discovery_max_nodes: 2_500, discovery_new_names_per_interval: 4_000 });

    // Assert
    expect(byDefault.discoveryNewNamesPerInterval).toBe(2_500);
    expect(smaller.discoveryNewNamesPerInterval).toBe(300);
    expect(larger.discoveryNewNamesPerInterval).toBe(2_500);
  });
});

describe("parseConfig rejects invalid values naming the key", () => {
  it.each<[Record<string, unknown>, string]>([
    [{ workers: -1 }, "workers"],
    [{ workers: 1.5 }, "workers"],
    [{ workers: "four" }, "workers"],
    [{ interval: "59s" }, "interval"],
    [{ interval: "soon" }, "interval"],
    [{ interval: 60 }, "interval"],
    [{ logfile: 3 }, "logfile"],
    [{ loglevel: "trace" }, "loglevel"],
    [{ helper: ["a"] }, "helper"],
    [{ helper: "" }, "helper"],
    [{ token: 1234 }, "token"],
    [{ lifecycle_component: "a.b" }, "lifecycle_component"],
    [{ lifecycle_component: "a>" }, "lifecycle_component"],
    [{ lifecycle_component: "a*" }, "lifecycle_component"],
    [{ lifecycle_component: "provision mode" }, "lifecycle_component"],
    [{ lifecycle_component: "provision\tmode" }, "lifecycle_component"],
    [{ identity: "choria_provisioner.>" }, "identity"],
    [{ identity: "choria_provisioner.*" }, "identity"],
    [{ identity: "choria provisioner" }, "identity"],
    [{ lease: { skew_bound: "0s" } }, "lease.skew_bound"],
    [{ lease: { skew_bound: "0s", assume_synchronized_clocks: "yes" } }, "lease.assume_synchronized_clocks"],
    [{ leader_election: true, helper_timeout: "26s" }, "helper_timeout"],
    [{ leader_election: true, lease: { duration: "1m", renew_interval: "10s", skew_bound: "10s" }, helper_timeout: "51s" }, "helper_timeout"],
    [{ discovery_max_nodes: 0 }, "discovery_max_nodes"],
    [{ discovery_max_nodes: "many" }, "discovery_max_nodes"],
    [{ discovery_new_names_per_interval: 0 }, "discovery_new_names_per_interval"],
    [{ discovery_new_names_per_interval: 2.5 }, "discovery_new_names_per_interval"],
    [{ choria_insecure: "yes please" }, "choria_insecure"],
    [{ site: 7 }, "site"],
    [{ monitor_port: 70000 }, "monitor_port"],
    [{ broker_port: -2 }, "broker_port"],
    [{ broker_provisioning_password: true }, "broker_provisioning_password"],
    [{ cert_deny_list: "x" }, "cert_deny_list"],
    [{ cert_deny_list: ["ok", "(unclosed"] }, "cert_deny_list.1"],
    [{ jwt_verify_cert: {} }, "jwt_verify_cert"],
    [{ jwt_signing_key: 1 }, "jwt_signing_key"],
    [{ jwt_signing_token: 1 }, "jwt_signing_token"],
    [{ server_jwt_validity: "forever" }, "server_jwt_validity"],
    [{ server_jwt_validity: "-1d" }, "server_jwt_validity"],
    [{ provisioning_jwt_warning: "0s" }, "provisioning_jwt_warning"],
    [{ provisioning_jwt_warning: "soon" }, "provisioning_jwt_warning"],
    [{ rego_policy: false }, "rego_policy"],
    [{ leader_election: "true" }, "leader_election"],
    [{ upgrades_repository: 5 }, "upgrades_repository"],
    [{ upgrades_optional: 1 }, "upgrades_optional"],
    [{ features: { pki: "on" } }, "features.pki"],
    [{ features: { jwt: 1 } }, "features.jwt"],
    [{ features: { pki: true, ed25519: true } }, "features.ed25519"],
    [{ features: { upgrades: "x" } }, "features.upgrades"],
    [{ features: { upgrades: true } }, "upgrades_repository"],
    [{ features: [] }, "features"],
    [{ broker_urls: [] }, "broker_urls"],
    [{ broker_urls: "nats://a:4222" }, "broker_urls"],
    [{ broker_urls: ["http://a:4222"] }, "broker_urls.0"],
    [{ broker_urls: ["nats://a:4222", "nats://"] }, "broker_urls.1"],
    [{ lifecycle_broker_urls: ["http://a:4222"] }, "lifecycle_broker_urls.0"],
    [{ lifecycle_broker_urls: ["nats://a:4222", "nats://u:secret@b:4222"] }, "lifecycle_broker_urls.1"],
    [{ lifecycle_broker_urls: "nats://a:4222" }, "lifecycle_broker_urls"],
    [{ identity: 1 }, "identity"],
    [{ callerid: 1 }, "callerid"],
    [{ protocol_version: 3 }, "protocol_version"],
    [{ protocol_version: 2, client_seed: "/seed" }, "client_jwt"],
    [{ protocol_version: 2, client_jwt: "a.b.c" }, "client_seed"],
    [{ client_jwt: 1 }, "client_jwt"],
    [{ client_seed: 1 }, "client_seed"],
    [{ tls: { ca: 1 } }, "tls.ca"],
    [{ tls: { cert: 1 } }, "tls.cert"],
    [{ tls: { key: 1 } }, "tls.key"],
    [{ tls: { insecure_skip_verify: "no" } }, "tls.insecure_skip_verify"],
    [{ nats_token: 1 }, "nats_token"],
    [{ deployment_id: 1 }, "deployment_id"],
    [{ lease: { duration: "0s" } }, "lease.duration"],
    [{ lease: { duration: "nope" } }, "lease.duration"],
    [{ lease: { renew_interval: "0s" } }, "lease.renew_interval"],
    [{ lease: { renew_interval: "30s" } }, "lease.renew_interval"],
    [{ lease: { skew_bound: "-1s" } }, "lease.skew_bound"],
    [{ leader_election: true, lease: { duration: "25s", renew_interval: "2s", skew_bound: "5s" } }, "lease.duration"],
    [{ helper_function: 1 }, "helper_function"],
    [{ helper_function: "fn" }, "helper_function"],
    [{ helper_timeout: "0s" }, "helper_timeout"],
    [{ helper_timeout: "ten" }, "helper_timeout"],
    [{ rpc_ttl: 10 }, "rpc_ttl"],
    [{ rpc_ttl: "60" }, "rpc_ttl"],
    [{ discovery_timeout: "0s" }, "discovery_timeout"],
  ])("%j -> %s", (overrides, key) => {
    // Act
    const error = configErrorOf(() => parse(overrides));

    // Assert
    expect(error.key).toBe(key);
    expect(error.message).toContain(`"${key}"`);
  });

  it("rejects a document that is not a mapping", () => {
    // Act
    const error = configErrorOf(() => parseConfig(["helper"]));

    // Assert
    expect(error.key).toBe("(root)");
  });

  it("never puts a secret value into the error", () => {
    // Arrange
    const secret = "hunter2-super-secret";

    // Act
    const errors = [
      configErrorOf(() => parse({ token: secret, interval: "1s" })),
      configErrorOf(() => parse({ token: secret, workers: "four" })),
      configErrorOf(() => parse({ token: [secret] })),
    ];

    // Assert
    for (const error of errors) {
      expect(error.message).not.toContain(secret);
      expect(inspect(error, { depth: 10 })).not.toContain(secret);
    }
  });
});

describe("unknown keys", () => {
  it("are ignored with one warning each, top level and nested", () => {
    // Arrange
    const logger = new RecordingLogger();

    // Act
    const config = parseConfig({ ...MINIMAL, flavour: "mint", features: { turbo: true } }, { logger, env: {} });

    // Assert
    expect(config.helper).toBe(MINIMAL.helper);
    expect(logger.at("warn").map((w) => w.attributes?.setting)).toEqual(["flavour", "features.turbo"]);
  });
});

describe("deployment_id and the lease bounds", () => {
  it("with leader election on, is required unless the stack provides its <stage>/<Region>/<account>, and is never the Region alone", () => {
    // Act
    const refused = configErrorOf(() => parse({ site: "lon", leader_election: true }, { AWS_REGION: "eu-west-1" }));
    const derived = parse({ site: "lon", leader_election: true }, { AWS_REGION: "eu-west-1", STACK_DEPLOYMENT_ID: "prod/eu-west-1/123456789012" });
    const configured = parse({ site: "lon", leader_election: true, deployment_id: "east" }, { STACK_DEPLOYMENT_ID: "prod/eu-west-1/123456789012" });

    // Assert
    expect(refused.key).toBe("deployment_id");
    expect(refused.message).toMatch(/required when leader_election is on/);
    expect(derived.deploymentId).toBe("prod/eu-west-1/123456789012");
    expect(configured.deploymentId).toBe("east");
  });

  it("refuses an rpc_ttl above 300 s (it is also how long a takeover waits), naming the key", () => {
    // Act
    const error = configErrorOf(() => parse({ rpc_ttl: 100_000 }));

    // Assert
    expect(error.key).toBe("rpc_ttl");
    expect(parse({ rpc_ttl: 300 }).rpcTtl).toBe(300);
  });
});

describe("tls.insecure_skip_verify", () => {
  it("is accepted with a warning that names the key", () => {
    // Arrange
    const logger = new RecordingLogger();

    // Act
    const config = parseConfig({ ...MINIMAL, tls: { insecure_skip_verify: true } }, { logger, env: {} });

    // Assert
    expect(config.tls.insecureSkipVerify).toBe(true);
    expect(logger.at("warn").map((w) => w.attributes?.setting)).toEqual(["tls.insecure_skip_verify"]);
  });
});

describe("discovery_new_names_per_interval over discovery_max_nodes", () => {
  it("is clamped to the cap with a warning that names both keys", () => {
    // Arrange
    const logger = new RecordingLogger();

    // Act
    const config = parseConfig({ ...MINIMAL, discovery_max_nodes: 2_500, discovery_new_names_per_interval: 4_000 }, { logger, env: {} });

    // Assert
    expect(config.discoveryNewNamesPerInterval).toBe(2_500);
    expect(logger.at("warn")).toMatchObject([{ attributes: { setting: "discovery_new_names_per_interval", detail: expect.stringContaining("discovery_max_nodes (2500)") } }]);
  });

  it("says nothing at or under the cap", () => {
    // Arrange
    const logger = new RecordingLogger();

    // Act
    parseConfig({ ...MINIMAL, discovery_max_nodes: 2_500, discovery_new_names_per_interval: 2_500 }, { logger, env: {} });

    // Assert
    expect(logger.at("warn")).toEqual([]);
  });
});

describe("redaction", () => {
  const secrets = {
    token: "tok-AAAAAAAA",
    broker_provisioning_password: "pw-BBBBBBBB",
    jwt_signing_key: "key-CCCCCCCC",
    jwt_signing_token: "jwt-DDDDDDDD",
    nats_token: "nats-EEEEEEEE",
    protocol_version: 2,
    client_jwt: "cjwt-FFFFFFFF",
    client_seed: "5eed".repeat(16),
  };
  const values = Object.values(secrets).filter((v): v is string => typeof v === "string");

  it("JSON.stringify, redacted() and util.inspect never show a secret", () => {
    // Arrange
    const config = parse(secrets);

    // Act
    const renderings = [JSON.stringify(config), JSON.stringify(config.redacted()), inspect(config, { depth: 5 })];

    // Assert
    for (const rendering of renderings) {
      for (const secret of values) expect(rendering).not.toContain(secret);
      expect(rendering).toContain("[redacted]");
    }
    expect(config.redacted().token).toBe("[redacted]");
    expect(config.redacted().site).toBe("");
  });

  it("keeps the secret values readable to the code that needs them", () => {
    // Act
    const config = parse(secrets);

    // Assert
    expect(config.token).toBe(secrets.token);
    expect(secretValues(config).sort()).toEqual([...values].sort());
  });

  it("leaves unset secrets unset rather than showing [redacted]", () => {
    // Act
    const view = parse({}).redacted();

    // Assert
    expect(view.token).toBeUndefined();
  });
});
