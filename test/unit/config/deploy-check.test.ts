import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";

const ROOT = resolve(import.meta.dirname, "../../..");

/** A deployable configuration; each case below breaks one key of it. */
const GOOD = {
  site: "lon",
  interval: "5m",
  helper_function: "choria-provisioner-helper",
  token: "ssm:/choria/token",
  broker_provisioning_password: "secretsmanager:choria/broker",
  broker_urls: ["tls://broker1.example.net:4222"],
  features: { jwt: true, ed25519: true },
  jwt_verify_cert: "3b2e7c0f4d8a1e6b5c9f2a7d0e4b8c1f6a3d9e2b7c0f5a8d1e4b7c2f9a6d3e0b",
  jwt_signing_key: "secretsmanager:choria/signing-key",
  tls: { ca: "config/files/example-ca.pem", cert: "ssm:/choria/tls/cert", key: "secretsmanager:choria/tls/key" },
  leader_election: true,
};

const exists = () => true;
const check = (document: Record<string, unknown>, options = {}) => checkDeploymentConfig(stringify(document), { exists, ...options });
const errorKeys = (document: Record<string, unknown>, options = {}) => check(document, options).errors.map((e) => e.key);

describe("checkDeploymentConfig", () => {
  it("passes a good configuration with no warning and derives the discovery schedule from interval", () => {
    const result = check(GOOD);

    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
    expect(result.discoverSchedule).toBe("rate(5 minutes)");
    expect(result.site).toBe("lon");
  });

  it.each([
    ["rate(1 minute)", "1m"],
    ["rate(60 minutes)", "1h"],
    ["rate(90 minutes)", "1h30m"],
  ])("schedules %s for interval %s", (schedule, interval) => {
    expect(check({ ...GOOD, interval }).discoverSchedule).toBe(schedule);
  });

  it.each([
    ["interval", { interval: "10s" }],
    ["interval", { interval: "90s" }],
    ["interval", { interval: 5 }],
    ["workers", { workers: -1 }],
    ["loglevel", { loglevel: "loud" }],
    ["broker_urls.0", { broker_urls: ["broker1.example.net"] }],
    ["broker_urls", { broker_urls: [] }],
    ["features.ed25519", { features: { pki: true, ed25519: true } }],
    ["helper_function", { helper: "/opt/bin/helper" }],
    ["lease.duration", { lease: { duration: "10s", renew_interval: "2s", skew_bound: "1s" } }],
    ["tls.insecure_skip_verify", { tls: { insecure_skip_verify: "sometimes" } }],
    ["client_jwt", { protocol_version: 2, client_seed: "ssm:/provisioner/seed" }],
    ["upgrades_repository", { features: { upgrades: true } }],
    ["cert_deny_list.0", { cert_deny_list: ["(unclosed"] }],
    ["rpc_ttl", { rpc_ttl: 5 }],
  ])("fails naming %s", (key, change) => {
    expect(errorKeys({ ...GOOD, ...change })).toEqual([key]);
  });

  it("fails on a document that is not a mapping", () => {
    expect(checkDeploymentConfig("- a\n- b\n").errors.map((e) => e.key)).toEqual(["(root)"]);
  });

  it.each([
    ["token", { token: "s3cret" }],
    ["broker_provisioning_password", { broker_provisioning_password: "hunter2" }],
    ["nats_token", { nats_token: "abc" }],
    ["jwt_signing_key", { jwt_signing_key: "a".repeat(64) }],
    ["jwt_signing_key", { jwt_signing_key: "-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----\n" }],
    ["jwt_signing_token", { jwt_signing_token: "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln" }],
    ["tls.key", { tls: { key: "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n" } }],
  ])("fails on a literal secret in %s", (key, change) => {
    const result = check({ ...GOOD, ...change });

    expect(result.errors.map((e) => e.key)).toEqual([key]);
    expect(result.errors[0]?.message).toContain("literal secret");
    expect(JSON.stringify(result)).not.toMatch(/s3cret|hunter2|MII/);
  });

  it("accepts a literal secret when explicitly allowed, still reporting it", () => {
    const result = check({ ...GOOD, token: "s3cret" }, { allowLiteralSecrets: true });

    expect(result.errors).toEqual([]);
    expect(result.warnings.map((w) => w.key)).toEqual(["token"]);
    // scripts/sls-local.sh passes the switch: its warning must not ask for it again.
    expect(result.warnings[0]?.message).toContain("accepted because allowLiteralSecrets=true");
    expect(result.warnings[0]?.message).not.toContain("pass allowLiteralSecrets");
  });

  it("does not take an empty secret for a literal one", () => {
    expect(errorKeys({ ...GOOD, token: "" })).toEqual([]);
  });

  it.each([
    ["tls.ca", { tls: { ca: "/etc/choria/ca.pem" } }, "will not exist on Lambda"],
    ["tls.cert", { tls: { cert: "certs/provisioner.pem" } }, "is not shipped"],
    ["jwt_verify_cert", { jwt_verify_cert: "/etc/choria-provisioner/signer.pem" }, "will not exist on Lambda"],
    ["helper", { helper_function: undefined, helper: "/usr/local/bin/provision-helper --site lon" }, "not shipped with the deployment"],
    ["helper", { helper_function: undefined, helper: "/opt/bin/provision-helper" }, "helperLayerDir"],
    ["jwt_signing_key", { jwt_signing_key: "/etc/choria/signer.key" }, "will not exist on Lambda"],
    ["jwt_signing_key", { jwt_signing_key: "config/files/signer.key" }, "ships a credential"],
  ])("reports %s paths that will not exist on Lambda", (key, change, message) => {
    const result = check({ ...GOOD, ...change });

    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([{ key, message: expect.stringContaining(message) }]);
  });

  it("accepts a helper from the helper layer and a shipped file that exists", () => {
    const result = check({ ...GOOD, helper_function: undefined, helper: "/opt/bin/provision-helper" }, { helperLayer: true });

    expect(result.warnings).toEqual([]);
  });

  it("reports a shipped path that does not exist", () => {
    const result = check(GOOD, { exists: () => false });

    expect(result.warnings).toEqual([{ key: "tls.ca", message: expect.stringContaining("does not exist") }]);
  });

  it("reports unknown keys, as the start-up log does", () => {
    expect(check({ ...GOOD, intervall: "5m" }).warnings.map((w) => w.key)).toEqual(["intervall"]);
  });

  it("warns about tls.insecure_skip_verify as itself, not as a key the Go daemon ignores", () => {
    const { warnings, errors } = check({ ...GOOD, tls: { ...GOOD.tls, insecure_skip_verify: true } });

    expect(errors).toEqual([]);
    expect(warnings).toEqual([{ key: "tls.insecure_skip_verify", message: expect.stringMatching(/certificate is not verified/) }]);
    expect(warnings[0]?.message).not.toMatch(/Go daemon/);
  });

  it("accepts leader_election without deployment_id: the deployed stack derives it from stage, Region and account", () => {
    expect(check(GOOD).errors).toEqual([]);
  });

  it("lists per function the references it resolves", () => {
    const { references } = check(GOOD);
    const names = (fn: keyof typeof references) => references[fn].map((r) => `${r.store}:${r.name}`).sort();

    expect(names("status")).toEqual([]);
    expect(names("release")).toEqual([]);
    expect(names("discover")).toEqual(["secretsmanager:choria/broker", "secretsmanager:choria/tls/key", "ssm:/choria/tls/cert"]);
    expect(names("provision")).toEqual([
      "secretsmanager:choria/broker",
      "secretsmanager:choria/signing-key",
      "secretsmanager:choria/tls/key",
      "ssm:/choria/tls/cert",
      "ssm:/choria/token",
    ]);
  });

  it.each(["config/provisioner.example.yaml", "examples/helper-layer/provisioner.yaml"])("passes the shipped example %s", async (file) => {
    const result = checkDeploymentConfig(await readFile(join(ROOT, file), "utf8"), { helperLayer: true, exists });

    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
  });
});
