/**
 * Every `choria-provisioner` command against DynamoDB Local and fauxqs, with the tables and queues
 * named as serverless.yml names them for a stage. The CLI runs in-process (it is an adapter over
 * lib/operator); one test runs the real bin as a process.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { DynamoDbAdmissionStore } from "../../../lib/admission/dynamodb-admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { decodeHostWork, encodeHostWork } from "../../../lib/app";
import { DynamoDbLeaseStore } from "../../../lib/lease/dynamodb-lease-store";
import { createLeaseGate } from "../../../lib/lease/gate";
import { DynamoDbPauseStore } from "../../../lib/lease/dynamodb-pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { createProvisionerTables, createQueueWithDeadLetter } from "../../../dev/local/resources";
import type { RunningSqs } from "../../../dev/local/services";
import { runCli } from "../../../lib/operator/cli";
import type { DeadLetterView, ElectionView, OperatorStatus, ReadmitResult } from "../../../lib/operator/operations";
import type { Clock } from "../../../lib/ports";
import { RecordingMetrics, VirtualClock } from "../../support/fakes";
import { receive, startLocalAws, type LocalAws } from "../../support/aws";

const ROOT = resolve(import.meta.dirname, "../../..");
const SITE = "ops";
let aws: LocalAws;
let sqs: RunningSqs;
let sqsApi: SQSClient;
let dynamo: DynamoDBClient;
let stage: string;
let queues: { hostWork: string; hostWorkDlq: string; lifecycle: string; lifecycleDlq: string };
let leaseStore: DynamoDbLeaseStore;
let registry: AdmissionRegistry;
let time: VirtualClock;
let clock: Clock;

const prefix = () => `choria-provisioner-${stage}`;

/** Runs the CLI the way an operator on the local emulators would: --stage plus the endpoints. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(["--stage", stage, "--site", SITE, ...args], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: { DYNAMODB_ENDPOINT: inject("dynamoEndpoint"), SQS_ENDPOINT: sqs.url, PROVISIONER_DEPLOYMENT_ID: "primary" },
    clock,
  });
  return { code, stdout, stderr };
}

async function cliJson<T>(...args: string[]): Promise<T> {
  const result = await cli(...args, "--json");
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

async function lead(holder: string): Promise<number> {
  const now = time.trueTime;
  // A release no longer lets a claim in before the expiry (docs/lease.md): the fixture takes the
  // lease over whatever it holds, to make a new term at once.
  const write = await leaseStore.claim({
    site: SITE,
    holder,
    expiresAt: now + 30_000,
    expiredBefore: Number.MAX_SAFE_INTEGER,
    // As the gates of these tests are configured: the default skew bound, no delivery horizon.
    skewBoundMs: 5_000,
    deliveryHorizonMs: 0,
    seenAt: now,
  });
  if (!write.applied) throw new Error("could not take the lease");
  return write.item.term;
}

async function deadLetter(body: string, attributes: Record<string, string> = {}): Promise<void> {
  await sqsApi.send(
    new SendMessageCommand({
      QueueUrl: queues.hostWorkDlq,
      MessageBody: body,
      MessageAttributes: Object.fromEntries(Object.entries(attributes).map(([name, value]) => [name, { DataType: "String", StringValue: value }])),
    }),
  );
}

const work = (identity: string, term: number) => encodeHostWork({ identity, term, admittedAt: time.trueTime - 5_000, source: "discovery" });

beforeAll(async () => {
  aws = await startLocalAws();
  ({ sqs, sqsApi, dynamo } = aws);
});

beforeEach(async () => {
  stage = `t${randomUUID().slice(0, 8)}`;
  await createProvisionerTables(dynamo, { lease: `${prefix()}-lease`, admission: `${prefix()}-admission` });
  const hostWork = createQueueWithDeadLetter(sqs, `${prefix()}-host-work`, { maxReceiveCount: 3 });
  const lifecycle = createQueueWithDeadLetter(sqs, `${prefix()}-lifecycle`, { maxReceiveCount: 3 });
  queues = { hostWork: hostWork.url, hostWorkDlq: hostWork.deadLetterUrl, lifecycle: lifecycle.url, lifecycleDlq: lifecycle.deadLetterUrl };
  time = new VirtualClock(Date.now());
  clock = time.skewed();
  leaseStore = new DynamoDbLeaseStore({ client: dynamo, tableName: `${prefix()}-lease` });
  registry = new AdmissionRegistry(
    { site: SITE, intervalMs: 60_000 },
    { store: new DynamoDbAdmissionStore({ client: dynamo, tableName: `${prefix()}-admission` }), metrics: new RecordingMetrics(), clock },
  );
});

afterAll(async () => {
  await aws?.stop();
});

describe("choria-provisioner status", () => {
  it("shows leader, term, expiry countdown, queue depths, registry counts and last errors", async () => {
    const term = await lead("primary");
    const failing = await registry.begin((await registry.admit("web1.example.net", "discovery", term))!, term);
    if (failing.status !== "claimed") throw new Error("expected a claim");
    await registry.recordFailure(failing.claim, { step: "helper", reason: "helper: cannot start helper", failures: 1, park: false });
    await registry.admit("web2.example.net", "discovery", term);
    await sqsApi.send(new SendMessageCommand({ QueueUrl: queues.hostWork, MessageBody: work("web2.example.net", term) }));
    await deadLetter("not json");
    time.advance(12_000);

    const status = await cliJson<OperatorStatus>("status");
    const people = await cli("status");

    expect(status.lease).toEqual({ leader: "primary", term, expiresAt: expect.any(Number), expiresInMs: 18_000, heldByThisDeployment: true });
    expect(status.queues.hostWork).toEqual({ visible: 1, inFlight: 0, delayed: 0 });
    expect(status.queues.hostWorkDlq).toMatchObject({ visible: 1 });
    expect(status.registry.byState).toMatchObject({ queued: 1, failed: 1 });
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "web1.example.net", failedStep: "helper", state: "failed" })]);
    expect(people.code).toBe(0);
    expect(people.stdout).toContain('site "ops", deployment primary: LEADER');
    expect(people.stdout).toContain(`lease: primary holds term ${term}, expires in 18.0s`);
    expect(people.stdout).toMatch(/host work\s+1\s+0\s+0/);
    expect(people.stdout).toMatch(/web1\.example\.net\s+failed\s+helper\s+1\s+12s ago\s+helper: cannot start helper/);
  });

  it("names the missing table and how to point at the right one", async () => {
    const result = await cli("status", "--lease-table", "nope-lease");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the lease table "nope-lease" does not exist at http://127.0.0.1');
    expect(result.stderr).toContain("--lease-table or LEASE_TABLE");
  });

  it("names the missing queue", async () => {
    const result = await cli("status", "--host-work-dlq", "no-such-dlq");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the queue "no-such-dlq" does not exist');
    expect(result.stderr).toContain("--host-work-dlq or HOST_WORK_DLQ_URL");
  });

  it("runs as the package's bin", async () => {
    await lead("primary");

    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, "bin/choria-provisioner.mjs"), "status", "--json", "--stage", stage, "--site", SITE, "--deployment", "primary"],
      { cwd: ROOT, env: { ...process.env, DYNAMODB_ENDPOINT: inject("dynamoEndpoint"), SQS_ENDPOINT: sqs.url } },
    );

    expect(JSON.parse(stdout)).toMatchObject({ site: SITE, deploymentId: "primary", lease: { leader: "primary" } });
  });
});

describe("choria-provisioner election view, pause and resume", () => {
  it("lists the leader and standbys; a paused deployment's gate reads closed and it does not contest", async () => {
    const term = await lead("standby");

    const paused = await cli("pause", "--reason", "helper upgrade", "--by", "alice");
    const view = await cliJson<ElectionView>("election", "view");
    const people = await cli("election", "view");
    const gate = createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: SITE, deploymentId: "primary" }), {
      store: leaseStore,
      pause: new DynamoDbPauseStore({ client: dynamo, tableName: `${prefix()}-lease` }),
      metrics: new RecordingMetrics(),
      clock,
    });
    time.advance(40_000);
    const whilePaused = await gate.currentTerm();
    const resumed = await cli("resume");
    const afterResume = await gate.currentTerm();

    expect(paused.code).toBe(0);
    expect(paused.stdout).toContain("paused deployment primary");
    expect(view.lease).toMatchObject({ leader: "standby", term });
    expect(view.deployments).toEqual([
      { deploymentId: "primary", role: "standby", paused: true, pause: expect.objectContaining({ by: "alice", reason: "helper upgrade" }) },
      { deploymentId: "standby", role: "leader", paused: false },
    ]);
    expect(people.stdout).toMatch(/primary\s+standby\s+yes \(by alice\)/);
    expect(whilePaused).toBeUndefined();
    expect(resumed.code).toBe(0);
    expect(afterResume).toBe(term + 1);
  });
});

describe("choria-provisioner dlq", () => {
  it("lists dead letters with host, term, step, failures and reason, and leaves them in the queue", async () => {
    const term = await lead("primary");
    await deadLetter(work("web1.example.net", term), { reason: "helper: cannot start helper", step: "helper", failures: "3" });
    await deadLetter("not json", { reason: "invalid host-work message: not JSON" });
    const retried = await registry.begin((await registry.admit("web3.example.net", "discovery", term))!, term);
    if (retried.status !== "claimed") throw new Error("expected a claim");
    await registry.retryLater(retried.claim, "the broker could not be reached");
    await deadLetter(work("web3.example.net", term));

    const letters = await cliJson<DeadLetterView[]>("dlq", "list");
    const again = await cliJson<DeadLetterView[]>("dlq", "list");

    const byHost = (identity: string | undefined) => letters.find((letter) => letter.identity === identity);
    expect(letters).toHaveLength(3);
    expect(again).toHaveLength(3);
    expect(byHost("web1.example.net")).toMatchObject({ term, step: "helper", failures: 3, reason: "helper: cannot start helper", poison: false });
    expect(byHost("web3.example.net")?.reason).toBe("retried until the receive limit; last error the broker could not be reached");
    expect(byHost(undefined)).toMatchObject({ poison: true, reason: "invalid host-work message: not JSON" });
  });

  it("requeue re-admits old-term dead letters under the current, newer term, so the provisioner works them", async () => {
    const oldTerm = await lead("primary");
    await deadLetter(work("web1.example.net", oldTerm), { reason: "helper: broken", step: "helper", failures: "3" });
    await deadLetter(work("web2.example.net", oldTerm), { reason: "helper: broken", step: "helper", failures: "3" });
    await deadLetter("not json");
    const newTerm = await lead("primary");

    const result = await cliJson<ReadmitResult>("dlq", "requeue", "--all");
    const queued = (await receive(sqsApi, queues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));
    const left = await receive(sqsApi, queues.hostWorkDlq);
    const begun = await registry.begin(queued[0]!, newTerm);

    expect(newTerm).toBe(oldTerm + 1);
    expect(result.term).toBe(newTerm);
    expect(result.requeued.sort()).toEqual(["web1.example.net", "web2.example.net"]);
    expect(result.skipped).toEqual([{ messageId: expect.any(String), reason: expect.stringContaining("poison, left in the DLQ") }]);
    expect(queued.map((entry) => [entry.identity, entry.term, entry.source]).sort()).toEqual([
      ["web1.example.net", newTerm, "operator"],
      ["web2.example.net", newTerm, "operator"],
    ]);
    expect(left.map((message) => message.Body)).toEqual(["not json"]);
    expect(begun.status).toBe("claimed");
  });

  it("requeue of named hosts takes only those", async () => {
    const term = await lead("primary");
    await deadLetter(work("web1.example.net", term));
    await deadLetter(work("web2.example.net", term));

    const result = await cliJson<ReadmitResult>("dlq", "requeue", "web2.example.net", "web9.example.net");
    const left = (await receive(sqsApi, queues.hostWorkDlq)).map((message) => decodeHostWork(message.Body ?? "").identity);

    expect(result.requeued).toEqual(["web2.example.net"]);
    expect(result.skipped).toEqual([{ identity: "web9.example.net", reason: "no dead letter for this host" }]);
    expect(left).toEqual(["web1.example.net"]);
  });

  it("requeue refuses on a deployment that does not lead, naming the leader", async () => {
    const term = await lead("standby");
    await deadLetter(work("web1.example.net", term));

    const result = await cli("dlq", "requeue", "--all");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`deployment primary does not lead site "ops" (standby holds term ${term})`);
    expect(await receive(sqsApi, queues.hostWorkDlq)).toHaveLength(1);
  });

  it("requeue refuses on a deployment that released its term, and status shows no leader", async () => {
    const term = await lead("primary");
    const released = await leaseStore.release({ site: SITE, holder: "primary", term });
    expect(released.applied).toBe(true);
    await deadLetter(work("web1.example.net", term));

    const result = await cli("dlq", "requeue", "--all");
    const status = await cliJson<OperatorStatus>("status");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`deployment primary does not lead site "ops" (no deployment holds the lease)`);
    expect(await receive(sqsApi, queues.hostWorkDlq)).toHaveLength(1);
    expect(status.lease).toMatchObject({ leader: null, term, expiresAt: null, expiresInMs: null, heldByThisDeployment: false });
  });
});

describe("choria-provisioner reprovision", () => {
  it("admits the hosts again under the current term, even ones provisioned a moment ago", async () => {
    const term = await lead("primary");
    const done = await registry.begin((await registry.admit("web1.example.net", "discovery", term))!, term);
    if (done.status !== "claimed") throw new Error("expected a claim");
    await registry.complete(done.claim, "provisioned");

    const result = await cliJson<ReadmitResult>("reprovision", "web1.example.net", "web2.example.net");
    const queued = (await receive(sqsApi, queues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));

    expect(result).toEqual({ term, requeued: ["web1.example.net", "web2.example.net"], skipped: [] });
    expect(queued.map((entry) => entry.identity).sort()).toEqual(["web1.example.net", "web2.example.net"]);
    expect(queued.every((entry) => entry.term === term && entry.source === "operator")).toBe(true);
  });

  it("rejects a usage mistake with the usage text", async () => {
    const result = await cli("reprovision");

    expect(result.code).toBe(2);
    expect(result.stderr).toContain("reprovision needs one or more identities");
    expect(result.stderr).toContain("Usage: choria-provisioner");
  });
});
