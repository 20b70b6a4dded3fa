/**
 * Every `choria-provisioner` command against DynamoDB Local and fauxqs, with the tables and queues
 * named as serverless.yml names them for a stage. The CLI runs in-process (it is an adapter over
 * lib/app/operator/); one test runs the real bin as a process.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import type { QuarantineEvidence } from "../../../lib/admission/quarantine";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { createLeaseGate } from "../../../lib/lease/gate";
import { DynamoDbPauseStore } from "../../../lib/dynamodb/pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { createProvisionerTables, createQueueWithDeadLetter } from "../../../dev/local/resources";
import type { RunningSqs } from "../../../dev/local/services";
import { SqsDeadLetterQueue } from "../../../lib/aws/sqs-dead-letters";
import { SqsMessageQueue } from "../../../lib/aws/sqs-queue";
import type { DeadLetterView } from "../../../lib/app/operator/dead-letters";
import type { DeploymentStatus, ReadmitResult } from "../../../lib/app/operator/report";
import { Operator, type ElectionView } from "../../../lib/app/operator/site-operator";
import type { RequeueJson } from "../../../cli/format";
import type { Clock } from "../../../lib/ports/clock";
import { RecordingMetrics, VirtualClock } from "../../support/fakes";
import { receive, startLocalAws, type LocalAws } from "../../support/aws";
import { operatorCli, takeLease } from "../../support/operator-cli";

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
const { cli, cliJson } = operatorCli(() => ({ stage, site: SITE, sqsUrl: sqs.url, clock }));

const lead = (holder: string) => takeLease(leaseStore, SITE, holder, time.trueTime);

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

    const status = await cliJson<DeploymentStatus>("status");
    const people = await cli("status");

    expect(status.lease).toEqual({ leader: "primary", term, expiresAt: expect.any(Number), expiresInMs: 18_000, heldByThisDeployment: true });
    expect(status.queues.hostWork).toEqual({ visible: 1, inFlight: 0, delayed: 0 });
    expect(status.queues.hostWorkDlq).toMatchObject({ visible: 1 });
    expect(status.registry.byState).toMatchObject({ queued: 1, failed: 1 });
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "web1.example.net", failedStep: "helper", state: "failed" })]);
    expect(people.code).toBe(0);
    expect(people.stdout).toContain('site "ops", deployment primary: LEADER');
    expect(people.stdout).toContain(`lease: primary holds term ${term}, expires in 18.0s`);
    expect(people.stdout).toContain(
      ["╭───────────────┬─────────┬───────────┬─────────╮", "│ queue         │ visible │ in flight │ delayed │", "├───────────────┼─────────┼───────────┼─────────┤", "│ host work     │ 1       │ 0         │ 0       │"].join("\n"),
    );
    expect(people.stdout).toMatch(/│ web1\.example\.net │ failed │ helper │ 1 +│ 12s ago │ helper: cannot start helper │/);
    expect(people.stdout).toMatch(/│ +last errors +│/);
  });

  it("forecasts the provisioning JWTs the hosts presented: per issuer, expiring within provisioning_jwt_warning, and expired", async () => {
    const DAY_MS = 24 * 3_600_000;
    const term = await lead("primary");
    const claimOn = async (identity: string) => {
      const begun = await registry.begin((await registry.admit(identity, "discovery", term))!, term);
      if (begun.status !== "claimed") throw new Error("expected a claim");
      return begun.claim;
    };
    const expiresAt = time.trueTime + 10 * DAY_MS;
    await registry.complete(await claimOn("web1.example.net"), "provisioned", undefined, { issuer: "Choria Tokens Package", expiresAt });
    await registry.recordFailure(await claimOn("web2.example.net"), {
      step: "jwt",
      reason: "jwt: could not validate JWT from web2.example.net: could not parse provisioner token: token has invalid claims: token is expired",
      failures: 1,
      park: false,
      provisioningJwt: { issuer: "Choria Tokens Package", expiresAt: time.trueTime - DAY_MS },
    });
    const config = join(await mkdtemp(join(tmpdir(), "cli-config-")), "provisioner.yaml");
    await writeFile(config, "site: ops\nprovisioning_jwt_warning: 5d\n");

    const status = await cliJson<DeploymentStatus>("status");
    const people = await cli("status");
    const narrower = await cliJson<DeploymentStatus>("status", "--config", config);

    expect(status.registry.provisioningJwts).toEqual({
      windowMs: 30 * DAY_MS,
      expiring: 1,
      expired: 1,
      issuers: [{ issuer: "Choria Tokens Package", hosts: 2, expiring: 1, expired: 1, nextExpiresAt: expiresAt }],
    });
    expect(people.stdout).toContain("provisioning JWTs the hosts presented: 1 expiring within 30d, 1 expired");
    expect(people.stdout).toContain("bake the images again with a fresh provisioning JWT");
    expect(people.stdout).toMatch(new RegExp(`│ Choria Tokens Package │ 2 +│ 1 +│ 1 +│ ${new Date(expiresAt).toISOString()} \\(in 10d\\) │`));
    expect(narrower.registry.provisioningJwts).toMatchObject({ windowMs: 5 * DAY_MS, expiring: 0, expired: 1 });
  });

  it("calls a deployment of a site nobody has led a candidate, never a standby", async () => {
    const never = await cli("status");
    const neverJson = await cliJson<DeploymentStatus>("status");
    await lead("elsewhere");
    // The other deployment's lease runs out: nobody leads now.
    time.advance(60_000);
    const expired = await cli("status");
    const view = await cliJson<ElectionView>("election", "view");
    await lead("elsewhere");
    const standby = await cli("status");

    expect(never.stdout).toContain('site "ops", deployment primary: CANDIDATE (no deployment leads the site now)\nlease: nobody has held the lease yet');
    expect(never.stdout).not.toContain("STANDBY");
    expect(neverJson.role).toBe("candidate");
    expect(expired.stdout).toContain("deployment primary: CANDIDATE");
    expect(view.deployments.map((deployment) => [deployment.deploymentId, deployment.role])).toEqual([
      ["elsewhere", "candidate"],
      ["primary", "candidate"],
    ]);
    expect(standby.stdout).toContain('site "ops", deployment primary: STANDBY\n');
  });

  it("counts entries past their expiry as expired, not as queued work", async () => {
    const term = await lead("primary");
    await registry.admit("web1.example.net", "discovery", term);
    await registry.admit("web2.example.net", "discovery", term);
    // web1's admission is long past its expiry (its work was dropped; the TTL has not deleted it yet).
    time.advance(2 * 3_600_000);
    await lead("primary");
    await registry.admit("web2.example.net", "discovery", term + 1);

    const status = await cliJson<DeploymentStatus>("status");
    const people = await cli("status");

    expect(status.registry.byState.queued).toBe(1);
    expect(status.registry.expired).toBe(1);
    expect(people.stdout).toMatch(/registry: 2 hosts \(queued 1, .*expired 1\)/);
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

  it("runs as the package's bin from a production install: the bundle alone, no tsx, no node_modules", async () => {
    await lead("primary");
    await promisify(execFile)(process.execPath, [join(ROOT, "scripts/build-cli.mjs")], { cwd: ROOT });
    const install = await mkdtemp(join(tmpdir(), "cli-install-"));
    await mkdir(join(install, "bin"));
    await mkdir(join(install, "dist"));
    await copyFile(join(ROOT, "bin/choria-provisioner.mjs"), join(install, "bin/choria-provisioner.mjs"));
    await copyFile(join(ROOT, "dist/choria-provisioner.mjs"), join(install, "dist/choria-provisioner.mjs"));

    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(install, "bin/choria-provisioner.mjs"), "status", "--json", "--stage", stage, "--site", SITE, "--deployment", "primary"],
      { cwd: install, env: { PATH: process.env.PATH, DYNAMODB_ENDPOINT: inject("dynamoEndpoint"), SQS_ENDPOINT: sqs.url, AWS_REGION: "us-east-1" } },
    );
    await rm(install, { recursive: true, force: true });

    expect(JSON.parse(stdout)).toMatchObject({ site: SITE, deploymentId: "primary", lease: { leader: "primary" } });
  }, 60_000);
});

describe("choria-provisioner election view, pause and resume", () => {
  it("lists the leader and standbys; a paused deployment's gate reads closed and it does not contest", async () => {
    const term = await lead("standby");

    // primary neither holds the lease nor was ever paused: the site does not know it yet.
    const paused = await cli("pause", "--reason", "helper upgrade", "--by", "alice", "--force");
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
    expect(paused.stdout).toContain("it does not hold the lease, so nothing fails over");
    expect(view.lease).toMatchObject({ leader: "standby", term });
    expect(view.deployments).toEqual([
      { deploymentId: "primary", role: "standby", paused: true, pause: expect.objectContaining({ by: "alice", reason: "helper upgrade" }) },
      { deploymentId: "standby", role: "leader", paused: false },
    ]);
    expect(people.stdout).toMatch(/│ primary +│ standby │ yes \(by alice\) │/);
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

  it("list says how many letters are in flight instead of calling the DLQ empty", async () => {
    const term = await lead("primary");
    await deadLetter(work("web1.example.net", term));
    // Another operator's listing holds the letter right now.
    await sqsApi.send(new ReceiveMessageCommand({ QueueUrl: queues.hostWorkDlq, VisibilityTimeout: 60, MaxNumberOfMessages: 10 }));

    const result = await cli("dlq", "list");

    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("empty");
    expect(result.stdout).toContain("no dead letter could be read; 1 more in flight");
  });

  it("requeue stopped midway leaves at most one host both queued and dead-lettered", async () => {
    const term = await lead("primary");
    const hosts = ["web1", "web2", "web3", "web4", "web5"].map((name) => `${name}.example.net`);
    for (const host of hosts) await deadLetter(work(host, term));
    const dlq = new SqsDeadLetterQueue({ client: sqsApi, url: queues.hostWorkDlq });
    type Letter = Parameters<SqsDeadLetterQueue["remove"]>[0];
    const received: Letter[] = [];
    const removed = new Set<string>();
    let removals = 0;
    // The process dies at its third removal (a kill between queueing a host's work and removing its
    // letter): it unhides nothing, its receives stay hidden until their visibility timeout.
    const dying = Object.assign(Object.create(dlq) as SqsDeadLetterQueue, {
      receive: async (max: number, hideSeconds: number) => {
        const page = await dlq.receive(max, hideSeconds);
        received.push(...page);
        return page;
      },
      remove: async (message: Letter) => {
        if (++removals === 3) throw new Error("killed");
        await dlq.remove(message);
        removed.add(message.messageId);
      },
      unhide: async () => undefined,
    });
    const operator = new Operator({
      site: SITE,
      deploymentId: "primary",
      lease: leaseStore,
      pause: new DynamoDbPauseStore({ client: dynamo, tableName: `${prefix()}-lease` }),
      registry,
      queues: {
        hostWork: new SqsMessageQueue({ client: sqsApi, url: queues.hostWork }),
        hostWorkDlq: dying,
        lifecycle: new SqsMessageQueue({ client: sqsApi, url: queues.lifecycle }),
        lifecycleDlq: new SqsMessageQueue({ client: sqsApi, url: queues.lifecycleDlq }),
      },
      clock,
    });

    await expect(operator.requeueDeadLetters({})).rejects.toThrow("killed");
    // What the visibility timeout would do a minute later, at once: the dead process's letters come back.
    await dlq.unhide(received.filter((letter) => !removed.has(letter.messageId)));
    const queued = new Set((await receive(sqsApi, queues.hostWork)).map((message) => decodeHostWork(message.Body ?? "").identity));
    const stillLettered = (await receive(sqsApi, queues.hostWorkDlq)).map((message) => decodeHostWork(message.Body ?? "").identity);

    expect(stillLettered).toHaveLength(3);
    expect(queued.size).toBe(3);
    expect(stillLettered.filter((identity) => queued.has(identity))).toHaveLength(1);
  }, 120_000);

  it("requeue re-admits old-term dead letters under the current, newer term, so the provisioner works them", async () => {
    const oldTerm = await lead("primary");
    await deadLetter(work("web1.example.net", oldTerm), { reason: "helper: broken", step: "helper", failures: "3" });
    await deadLetter(work("web2.example.net", oldTerm), { reason: "helper: broken", step: "helper", failures: "3" });
    await deadLetter("not json");
    const newTerm = await lead("primary");

    const result = await cliJson<RequeueJson>("dlq", "requeue", "--all");
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

    const result = await cliJson<RequeueJson>("dlq", "requeue", "web2.example.net", "web9.example.net");
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
    const status = await cliJson<DeploymentStatus>("status");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`deployment primary does not lead site "ops" (no deployment holds the lease)`);
    expect(await receive(sqsApi, queues.hostWorkDlq)).toHaveLength(1);
    expect(status.lease).toMatchObject({ leader: null, term, expiresAt: null, expiresInMs: null, heldByThisDeployment: false });
  });
});

describe("choria-provisioner reprovision", () => {
  it("with --force admits the hosts again under the current term, even ones provisioned a moment ago", async () => {
    const term = await lead("primary");
    const done = await registry.begin((await registry.admit("web1.example.net", "discovery", term))!, term);
    if (done.status !== "claimed") throw new Error("expected a claim");
    await registry.complete(done.claim, "provisioned");

    const result = await cliJson<ReadmitResult>("reprovision", "web1.example.net", "web2.example.net", "--force");
    const queued = (await receive(sqsApi, queues.hostWork)).map((message) => decodeHostWork(message.Body ?? ""));

    expect(result).toEqual({ term, admitted: ["web1.example.net", "web2.example.net"], refused: [] });
    expect(queued.map((entry) => entry.identity).sort()).toEqual(["web1.example.net", "web2.example.net"]);
    expect(queued.every((entry) => entry.term === term && entry.source === "operator")).toBe(true);
  });

  it("refuses provisioned and unknown hosts, admits the known one, and says what it did", async () => {
    const term = await lead("primary");
    const done = await registry.begin((await registry.admit("web1.example.net", "discovery", term))!, term);
    if (done.status !== "claimed") throw new Error("expected a claim");
    await registry.complete(done.claim, "provisioned");
    // Known and waiting: discovery admitted it, its work is not taken yet.
    await registry.admit("web3.example.net", "discovery", term);

    const result = await cli("reprovision", "web1.example.net", "web2.example.net", "web3.example.net");
    const queued = (await receive(sqsApi, queues.hostWork)).map((message) => decodeHostWork(message.Body ?? "").identity);

    expect(result.code).toBe(1);
    expect(queued).toEqual(["web3.example.net"]);
    expect(result.stdout).toContain("web1.example.net: not admitted: already provisioned");
    expect(result.stdout).toContain("web2.example.net: not admitted: not known to the registry");
    expect(result.stdout).toContain(`web3.example.net: admitted for provisioning under term ${term}`);
    expect(result.stdout).toContain("Finished processing 3 hosts: 1 admitted for provisioning, 2 not");
    expect(result.stdout).toContain("this does not put a configured node back into it");
  });

  it("refuses while this deployment's lease is within the skew bound of its expiry", async () => {
    await lead("primary");
    await registry.admit("web3.example.net", "discovery", 1);
    // The lease was taken 30 s long; 27 s later 3 s are left, less than the 5 s skew bound.
    time.advance(27_000);

    const result = await cli("reprovision", "web3.example.net", "--force");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain("for less than the skew bound (5 s)");
    expect(await receive(sqsApi, queues.hostWork)).toEqual([]);
  });

  it("rejects a usage mistake in one line, without the whole usage", async () => {
    const result = await cli("reprovision");

    expect(result.code).toBe(2);
    expect(result.stderr).toBe("choria-provisioner: reprovision needs one or more identities; see choria-provisioner reprovision --help\n");
  });
});

describe("choria-provisioner quarantine (docs/audit.md)", () => {
  const twins: QuarantineEvidence = { reason: "2 different answers to one jwt request: two machines answer as this identity", senders: [{ ecdh: "0123456789abcdef", jwt: "aaaaaaaaaaaaaaaa", subject: "image-2026" }, { ecdh: "fedcba9876543210", jwt: "aaaaaaaaaaaaaaaa" }] };

  it("list shows each quarantined host with both senders, as status does; release makes it admissible at once, on a standby too", async () => {
    // Arrange: this deployment does not lead; the release needs no term.
    const term = await lead("elsewhere");
    await registry.quarantine("twin.example.net", twins, term, "discovery");
    await registry.quarantine("web12", { reason: "the identity has no domain part", senders: [] }, term, "event");
    await registry.admit("ok.example.net", "discovery", term);
    time.advance(5_000);

    // Act
    const listed = await cliJson<Array<{ identity: string; senders: unknown[] }>>("quarantine", "list");
    const people = await cli("quarantine", "list");
    const status = await cliJson<DeploymentStatus>("status");
    const statusText = await cli("status");
    const released = await cli("quarantine", "release", "twin.example.net");
    const again = await cli("quarantine", "release", "twin.example.net");
    const admitted = await registry.admit("twin.example.net", "discovery", term);
    const stillHeld = await registry.admit("web12", "discovery", term);

    // Assert
    expect(listed.map((host) => host.identity).sort()).toEqual(["twin.example.net", "web12"]);
    expect(listed.find((host) => host.identity === "twin.example.net")?.senders).toEqual(twins.senders);
    expect(people.code).toBe(0);
    expect(people.stdout).toMatch(/│ twin\.example\.net │ 5s ago │ 2 different answers to one jwt request.* │ ecdh 0123456789abcdef, jwt aaaaaaaaaaaaaaaa, subject image-2026 │/);
    expect(people.stdout).toMatch(/│ +│ +│ +│ ecdh fedcba9876543210, jwt aaaaaaaaaaaaaaaa +│/);
    expect(people.stdout).toContain("2 quarantined hosts: release each once resolved with choria-provisioner quarantine release <identity>");
    expect(status.registry.byState.quarantined).toBe(2);
    expect(status.registry.quarantined).toHaveLength(2);
    expect(statusText.stdout).toContain("quarantined 2");
    expect(statusText.stdout).toMatch(/│ +quarantined +│/);
    expect(released).toEqual({ code: 0, stdout: "released twin.example.net: the next discovery or startup event admits it\n", stderr: "" });
    expect(again).toMatchObject({ code: 1, stdout: "twin.example.net is not quarantined\n" });
    expect(admitted).toMatchObject({ identity: "twin.example.net", term });
    expect(stillHeld).toBeUndefined();
  });

  it("release refuses anything but one valid identity, saying what was wrong", async () => {
    const none = await cli("quarantine", "release");
    const wildcard = await cli("quarantine", "release", "web*.example.net");
    const empty = await cliJson<unknown[]>("quarantine", "list");

    expect(none).toMatchObject({ code: 2, stderr: expect.stringContaining("quarantine release takes one identity") });
    expect(wildcard).toMatchObject({ code: 1, stderr: expect.stringContaining('identity "web*.example.net" contains a NATS wildcard') });
    expect(empty).toEqual([]);
  });
});

describe("choria-provisioner reads like the Choria CLI", () => {
  it("has election info beside election view", async () => {
    await lead("primary");

    const info = await cliJson<ElectionView>("election", "info");

    expect(info.lease).toMatchObject({ leader: "primary" });
  });

  it("prints a group's subcommands for election or dlq alone", async () => {
    const election = await cli("election");
    const dlq = await cli("dlq");

    expect(election).toMatchObject({ code: 0, stderr: "" });
    expect(election.stdout).toContain("election view | info");
    expect(dlq).toMatchObject({ code: 0, stderr: "" });
    expect(dlq.stdout).toContain("dlq list");
    expect(dlq.stdout).toContain("dlq requeue (--all | <identity>...)");
  });

  it("refuses dlq requeue with neither --all nor identities", async () => {
    const result = await cli("dlq", "requeue");

    expect(result.code).toBe(2);
    expect(result.stderr).toContain("dlq requeue takes either --all or one or more identities");
  });
});

describe("choria-provisioner pause", () => {
  it("refuses a deployment the site does not know, naming the ones it knows", async () => {
    await lead("primary");

    const result = await cli("pause", "--deployment", "primray");
    const view = await cliJson<ElectionView>("election", "view");

    expect(result.code).toBe(1);
    expect(result.stderr).toContain('site "ops" knows no deployment primray (known: primary)');
    expect(view.deployments.map((deployment) => [deployment.deploymentId, deployment.paused])).toEqual([["primary", false]]);
  });

  it("gives the takeover time as the lease's expiry plus skew_bound plus rpc_ttl", async () => {
    await lead("primary");
    const expiresAt = (await leaseStore.read(SITE))?.expiresAt as number;
    const config = join(await mkdtemp(join(tmpdir(), "cli-config-")), "provisioner.yaml");
    await writeFile(config, "site: ops\nrpc_ttl: 60\nlease:\n  skew_bound: 7s\n");

    const result = await cli("pause", "--config", config);

    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`a standby can take over from ${new Date(expiresAt + 7_000 + 60_000).toISOString().slice(11, 19)} UTC`);
  });

  it("waits out the lease item's longer delivery horizon, as a standby's claim does (a holder's container with a longer rpc_ttl)", async () => {
    const now = time.trueTime;
    await leaseStore.claim({
      site: SITE,
      holder: "primary",
      expiresAt: now + 30_000,
      expiredBefore: Number.MAX_SAFE_INTEGER,
      waitedHorizonMs: Number.MAX_SAFE_INTEGER,
      skewBoundMs: 9_000,
      deliveryHorizonMs: 120_000,
      seenAt: now,
    });
    const config = join(await mkdtemp(join(tmpdir(), "cli-config-")), "provisioner.yaml");
    await writeFile(config, "site: ops\nrpc_ttl: 60\nlease:\n  skew_bound: 7s\n");

    const result = await cli("pause", "--config", config);

    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`a standby can take over from ${new Date(now + 30_000 + 9_000 + 120_000).toISOString().slice(11, 19)} UTC`);
  });
});
