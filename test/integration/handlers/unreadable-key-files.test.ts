/**
 * `status` and `release` never read the TLS or JWT key files (docs/architecture.md, per-function composition): an operator asks for the
 * status exactly when something is wrong, e.g. a key file that cannot be read, so these functions
 * must answer whatever the state of those files. The deployed handlers run here as Lambda runs them,
 * built from the environment on their first invocation, against DynamoDB Local and fauxqs;
 * `provision`, which does read the files, refuses to start and names the key.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startSqs, type RunningSqs } from "../../../dev/local/services";
import { createQueues, createTables, dynamoClient, lambdaContext } from "../../support/aws";

const KEY_FILES = ["ca.pem", "cert.pem", "key.pem", "verify.pem", "signing.key"] as const;
let dir: string;
let sqs: RunningSqs;
const savedEnv = { ...process.env };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "unreadable-keys-"));
  // A directory where a file is expected cannot be read, also by root.
  for (const name of KEY_FILES) await mkdir(join(dir, name));
  sqs = await startSqs();
  const dynamoEndpoint = inject("dynamoEndpoint");
  const prefix = `unreadable-${Date.now()}`;
  const tables = await createTables(dynamoClient(dynamoEndpoint), prefix);
  const queues = createQueues(sqs, prefix);
  const yaml = [
    "site: lon",
    "deployment_id: unreadable",
    "leader_election: true",
    "helper: /bin/true",
    "token: provisioning-token",
    "broker_urls: [tls://broker.example.net:4222]",
    "features: { jwt: true, ed25519: true }",
    `jwt_verify_cert: ${join(dir, "verify.pem")}`,
    `jwt_signing_key: ${join(dir, "signing.key")}`,
    "tls:",
    `  ca: ${join(dir, "ca.pem")}`,
    `  cert: ${join(dir, "cert.pem")}`,
    `  key: ${join(dir, "key.pem")}`,
  ].join("\n");
  Object.assign(process.env, {
    PROVISIONER_CONFIG_YAML: yaml,
    LEASE_TABLE: tables.lease,
    ADMISSION_TABLE: tables.admission,
    HOST_WORK_QUEUE_URL: queues.hostWork,
    HOST_WORK_DLQ_URL: queues.hostWorkDlq,
    LIFECYCLE_QUEUE_URL: queues.lifecycle,
    LIFECYCLE_DLQ_URL: queues.lifecycleDlq,
    DYNAMODB_ENDPOINT: dynamoEndpoint,
    SQS_ENDPOINT: sqs.url,
    AWS_REGION: "us-east-1",
    POWERTOOLS_METRICS_DISABLED: "true",
    POWERTOOLS_LOG_LEVEL: "ERROR",
  });
});

afterAll(async () => {
  process.env = savedEnv;
  await sqs?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("deployed functions with unreadable TLS and key files", () => {
  it("status answers with the lease, the queues and the registry", async () => {
    const { handler } = await import("../../../handlers/status");

    const report = (await handler({}, lambdaContext())) as { site: string; lease: unknown; queues: Record<string, unknown>; registry: unknown };

    expect(report.site).toBe("lon");
    expect(Object.keys(report.queues).sort()).toEqual(["hostWork", "hostWorkDlq", "lifecycle", "lifecycleDlq"]);
    expect(report.registry).toBeDefined();
  });

  it("release answers that this deployment holds no lease", async () => {
    const { handler } = await import("../../../handlers/release");

    const result = (await handler({}, lambdaContext())) as { released: boolean };

    expect(result.released).toBe(false);
  });

  it("provision refuses to start, naming the key whose file it cannot read", async () => {
    const { handler } = await import("../../../handlers/provision");

    await expect(handler({ Records: [] }, lambdaContext())).rejects.toThrow(/tls\.ca.*could not be read/);
  });
});
