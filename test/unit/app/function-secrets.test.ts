/**
 * Each function resolves only the secrets it uses (lib/config/secrets.ts FUNCTION_SETTINGS), and
 * key/certificate settings take the PEM from a secret store or a file shipped in the bundle.
 * createApp connects nothing until first use, so no service is needed here.
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AppSettings } from "../../../lib/aws/settings";
import { createApp, type AppOverrides } from "../../../dev/local/create-app";
import { partsFunction } from "../../../lib/aws/compose";
import { lifecycleEventSource } from "../../../lib/aws/compose-broker";
import { brokerFunction } from "../../../lib/aws/compose-broker-function";
import { discoverFunction } from "../../../lib/aws/functions/discover";
import { leaseKeeperFunction } from "../../../lib/aws/functions/lease-keeper";
import { lifecycleFunction } from "../../../lib/aws/functions/lifecycle";
import { provisionFunction } from "../../../lib/aws/functions/provision";
import { releaseFunction } from "../../../lib/aws/functions/release";
import { renewFunction } from "../../../lib/aws/functions/renew";
import { reprovisionFunction } from "../../../lib/aws/functions/reprovision";
import { statusFunction } from "../../../lib/aws/functions/status";
import { brokerSettings } from "../../../lib/aws/choria-client";
import { parseConfig } from "../../../lib/config/config";
import { formatSecretReference, type FunctionName, type SecretReference, type SecretResolver, FUNCTION_NAMES } from "../../../lib/config/secrets";
import { ConfigError } from "../../../lib/errors";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { silentLogger } from "../../../lib/ports/logger";
import { localAppSettings } from "../../support/app-settings";

const TLS_KEY = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString();
const CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const SIGNING_SEED = "a".repeat(64);

const SECRETS: Record<string, string> = {
  "ssm:/choria/token": "token-value",
  "secretsmanager:choria/broker": "broker-password",
  "ssm:/choria/nats": "nats-token",
  "ssm:/choria/tls/ca": CERT,
  "ssm:/choria/tls/cert": CERT,
  "secretsmanager:choria/tls/key": TLS_KEY,
  "secretsmanager:choria/signing-key": SIGNING_SEED,
};

const YAML = [
  "site: lon",
  "helper: /bin/true",
  "broker_urls: [tls://broker.example.net:4222]",
  "renew: { enabled: true, broker_urls: [tls://main.example.net:4222] }",
  "token: ssm:/choria/token",
  "broker_provisioning_password: secretsmanager:choria/broker",
  "nats_token: ssm:/choria/nats",
  "features: { jwt: true, ed25519: true }",
  `jwt_verify_cert: ${"b".repeat(64)}`,
  "jwt_signing_key: secretsmanager:choria/signing-key",
  "tls:",
  "  ca: ssm:/choria/tls/ca",
  "  cert: ssm:/choria/tls/cert",
  "  key: secretsmanager:choria/tls/key",
].join("\n");

class RecordingResolver implements SecretResolver {
  readonly resolved: string[] = [];
  async resolve(reference: SecretReference): Promise<string> {
    const name = formatSecretReference(reference);
    this.resolved.push(name);
    const value = SECRETS[name];
    if (value === undefined) throw new Error(`no secret ${name}`);
    return value;
  }
}

/** Nothing listens there: composing a function connects to nothing, so no request is ever made. */
const UNREACHABLE = "http://127.0.0.1:1";
const NO_SERVICES = {
  tables: { lease: "lease", admission: "admission" },
  queues: {
    hostWork: `${UNREACHABLE}/q/host-work`,
    hostWorkDlq: `${UNREACHABLE}/q/host-work-dlq`,
    lifecycle: `${UNREACHABLE}/q/lifecycle`,
    lifecycleDlq: `${UNREACHABLE}/q/lifecycle-dlq`,
  },
  dynamoEndpoint: UNREACHABLE,
  sqsUrl: UNREACHABLE,
};

function settings(fn: FunctionName | undefined): AppSettings {
  return localAppSettings(YAML, NO_SERVICES, { function: fn, leaseTable: undefined });
}

async function resolvedBy(fn: FunctionName | undefined): Promise<string[]> {
  const secrets = new RecordingResolver();
  const app = await createApp(settings(fn), { secrets, logger: silentLogger, metrics: new InMemoryMetrics("lon") });
  await app.close();
  return [...secrets.resolved].sort();
}

const BROKER = [
  "secretsmanager:choria/broker",
  "secretsmanager:choria/tls/key",
  "ssm:/choria/nats",
  "ssm:/choria/tls/ca",
  "ssm:/choria/tls/cert",
];

describe("secrets resolved per function", () => {
  it("status and release read no secret at all", async () => {
    expect(await resolvedBy("status")).toEqual([]);
    expect(await resolvedBy("release")).toEqual([]);
  });

  it.each(["discover", "leaseKeeper", "lifecycle", "reprovision"] as const)(
    "%s reads only what the broker connection needs",
    async (fn) => {
      expect(await resolvedBy(fn)).toEqual(BROKER);
    },
  );

  it("provision also reads the token and the JWT signing key", async () => {
    expect(await resolvedBy("provision")).toEqual([...BROKER, "secretsmanager:choria/signing-key", "ssm:/choria/token"].sort());
  });

  it("renew reads what the broker connection needs and the token its reprovision requests carry, no signing key", async () => {
    expect(await resolvedBy("renew")).toEqual([...BROKER, "ssm:/choria/token"].sort());
  });

  it("a local run of every function reads every reference", async () => {
    expect(await resolvedBy(undefined)).toEqual(Object.keys(SECRETS).sort());
  });

  it("covers every deployed function", () => {
    expect([...FUNCTION_NAMES].sort()).toEqual(
      ["discover", "leaseKeeper", "lifecycle", "provision", "status", "reprovision", "release", "renew"].sort(),
    );
  });
});

/** The deployed functions' own compositions (what each handler, handlers/*.ts, runs), by function name. */
const COMPOSITIONS: Record<FunctionName, (settings: AppSettings, overrides: AppOverrides) => Promise<{ close(): Promise<void> }>> = {
  discover: brokerFunction("discover", discoverFunction),
  leaseKeeper: brokerFunction("leaseKeeper", leaseKeeperFunction),
  lifecycle: brokerFunction("lifecycle", async (composed) => lifecycleFunction(composed, await lifecycleEventSource(composed.parts, composed.broker))),
  provision: brokerFunction("provision", provisionFunction),
  status: partsFunction("status", statusFunction),
  reprovision: brokerFunction("reprovision", reprovisionFunction),
  release: partsFunction("release", releaseFunction),
  renew: brokerFunction("renew", renewFunction),
};

describe("secrets resolved by each deployed function's own composition", () => {
  async function resolvedByComposition(fn: FunctionName): Promise<string[]> {
    const secrets = new RecordingResolver();
    // No `function` in the settings: each composition knows which function it is.
    const composed = await COMPOSITIONS[fn](settings(undefined), { secrets, logger: silentLogger, metrics: new InMemoryMetrics("lon") });
    await composed.close();
    return [...secrets.resolved].sort();
  }

  it.each(["status", "release"] as const)("%s reads no secret at all", async (fn) => {
    expect(await resolvedByComposition(fn)).toEqual([]);
  });

  it.each(["discover", "leaseKeeper", "lifecycle", "reprovision"] as const)("%s reads only what the broker connection needs", async (fn) => {
    expect(await resolvedByComposition(fn)).toEqual(BROKER);
  });

  it("provision also reads the token and the JWT signing key", async () => {
    expect(await resolvedByComposition("provision")).toEqual([...BROKER, "secretsmanager:choria/signing-key", "ssm:/choria/token"].sort());
  });

  it("renew reads the broker connection's secrets and the token, no signing key", async () => {
    expect(await resolvedByComposition("renew")).toEqual([...BROKER, "ssm:/choria/token"].sort());
  });
});

/** The TLS material the broker connection is given for these settings (each key or certificate setting read as its PEM). */
async function brokerTls(tls: { ca?: string; cert?: string; key?: string }) {
  const config = parseConfig({ site: "lon", helper: "/bin/true", broker_urls: ["tls://broker.example.net:4222"] });
  const settings = await brokerSettings({ ...config, choriaInsecure: false, tls: { ca: undefined, cert: undefined, key: undefined, insecureSkipVerify: false, ...tls } }, "test");
  return settings.tls;
}

describe("key and certificate settings", () => {
  let root: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "task-root-"));
  });

  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(root, { recursive: true, force: true });
  });

  it("takes a PEM fetched from a secret store as the material itself", async () => {
    expect((await brokerTls({ key: TLS_KEY }))?.key).toBe(TLS_KEY);
  });

  it("reads a relative path from the function's bundle (LAMBDA_TASK_ROOT)", async () => {
    // Arrange
    await mkdir(join(root, "config/files"), { recursive: true });
    await writeFile(join(root, "config/files/ca.pem"), CERT);
    vi.stubEnv("LAMBDA_TASK_ROOT", root);

    // Act
    const material = (await brokerTls({ ca: "config/files/ca.pem" }))?.ca;

    // Assert
    expect(material).toBe(CERT);
  });

  it("refuses a reference its function was not given, naming the setting", async () => {
    const error = await brokerTls({ key: "ssm:/choria/tls/key" }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).key).toBe("tls.key");
  });

  it("names the setting when a file is missing", async () => {
    const error = await brokerTls({ cert: join(root, "absent.pem") }).catch((e: unknown) => e);

    expect((error as ConfigError).key).toBe("tls.cert");
  });
});
