/**
 * `choria-provisioner renew` and the renewal lines of `status` against DynamoDB Local, with the
 * tables named as serverless.yml names them for a stage, and the request carried out by the renew
 * use case on the same DynamoDB renewal state.
 */
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { Renewal } from "../../../lib/app/renewal";
import { DynamoDbRenewalStore } from "../../../lib/dynamodb/renewal-store";
import { createProvisionerTables, createQueueWithDeadLetter } from "../../../dev/local/resources";
import type { RunningSqs } from "../../../dev/local/services";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { DynamoDbPauseStore } from "../../../lib/dynamodb/pause-store";
import type { DeploymentStatus } from "../../../lib/app/operator/report";
import type { RenewRequestResult } from "../../../lib/app/operator/renewal-operator";
import type { Clock } from "../../../lib/ports/clock";
import { FakeGate, FakeRpc, RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";
import { startLocalAws, type LocalAws } from "../../support/aws";
import { operatorCli, takeLease } from "../../support/operator-cli";
import { renewalSettings } from "../../support/renewal";

const SITE = "ops";
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
let aws: LocalAws;
let sqs: RunningSqs;
let dynamo: DynamoDBClient;
let stage: string;
let leaseStore: DynamoDbLeaseStore;
let registry: AdmissionRegistry;
let renewalStore: DynamoDbRenewalStore;
let time: VirtualClock;
let clock: Clock;

const prefix = () => `choria-provisioner-${stage}`;

/** Runs the CLI the way an operator on the local emulators would: --stage plus the endpoints. */
const { cli, cliJson } = operatorCli(() => ({ stage, site: SITE, sqsUrl: sqs.url, clock, env: { USER: "alice" } }));

const lead = (holder: string) => takeLease(leaseStore, SITE, holder, time.trueTime);

async function provisioned(identity: string, expiresAt: number, term: number): Promise<void> {
  const begun = await registry.begin((await registry.admit(identity, "discovery", term))!, term);
  if (begun.status !== "claimed") throw new Error(`could not claim ${identity}`);
  await registry.complete(begun.claim, "provisioned", { expiresAt, kind: "certificate", issuedAt: time.trueTime });
}

beforeAll(async () => {
  aws = await startLocalAws();
  ({ sqs, dynamo } = aws);
});

beforeEach(async () => {
  stage = `r${randomUUID().slice(0, 8)}`;
  await createProvisionerTables(dynamo, { lease: `${prefix()}-lease`, admission: `${prefix()}-admission` });
  // status reads the queue depths too.
  createQueueWithDeadLetter(sqs, `${prefix()}-host-work`, { maxReceiveCount: 3 });
  createQueueWithDeadLetter(sqs, `${prefix()}-lifecycle`, { maxReceiveCount: 3 });
  time = new VirtualClock(Date.now());
  clock = time.skewed();
  leaseStore = new DynamoDbLeaseStore({ client: dynamo, tableName: `${prefix()}-lease` });
  renewalStore = new DynamoDbRenewalStore({ client: dynamo, tableName: `${prefix()}-admission` });
  registry = new AdmissionRegistry(
    { site: SITE, intervalMs: 60_000 },
    { store: new DynamoDbAdmissionStore({ client: dynamo, tableName: `${prefix()}-admission` }), metrics: new RecordingMetrics(), clock },
  );
});

afterAll(async () => {
  await aws?.stop();
});

describe("choria-provisioner renew", () => {
  it("lists on a dry run the hosts due within the given time, soonest first, and writes nothing", async () => {
    // Arrange
    const term = await lead("primary");
    await provisioned("late.example.net", time.trueTime + 20 * DAY_MS, term);
    await provisioned("soon.example.net", time.trueTime + 2 * DAY_MS, term);
    await provisioned("mid.example.net", time.trueTime + 5 * DAY_MS, term);

    // Act
    const result = await cliJson<RenewRequestResult>("renew", "--due-within", "7d", "--dry-run");
    const people = await cli("renew", "--due-within", "7d", "--dry-run");

    // Assert
    expect(result).toMatchObject({ term, dryRun: true, skipped: [] });
    expect(result.hosts.map((host) => host.identity)).toEqual(["soon.example.net", "mid.example.net"]);
    // As every verb of the CLI, it ends with its summary line.
    expect(people.stdout.trimEnd().split("\n").at(-1)).toBe("Finished processing 2 hosts: 2 would be renewed, 0 not; dry run, nothing was requested");
    expect((await renewalStore.read(SITE)).version).toBe(0);
  });

  it("hands the named hosts to the leader's next renew run under the current term, which sends them reprovision", async () => {
    // Arrange
    const term = await lead("primary");
    await provisioned("web1.example.net", time.trueTime + 300 * DAY_MS, term);
    await provisioned("web2.example.net", time.trueTime + 300 * DAY_MS, term);
    const rpc = new FakeRpc().respond("choria_provision#reprovision", () => ({ message: "Restarting after 4s" }));
    const gate = Object.assign(new FakeGate(clock), { standing: async () => ({ kind: "leading" as const, term }) });
    const renewal = new Renewal({
      // Automatic renewal off: only the operator's request is carried out.
      settings: renewalSettings({ site: SITE, enabled: false }),
      gate,
      registry,
      store: renewalStore,
      rpc,
      prepareRpc: async () => undefined,
      clock,
      logger: new RecordingLogger(),
      metrics: new RecordingMetrics(),
    });

    // The leader's renew runs are going (every minute): here is one.
    await renewal.run({ remainingMs: () => 60_000 });

    // Act
    const requested = await cli("renew", "--identity", "web2.example.net", "--identity", "nope.example.net", "--rate", "5");
    const run = await renewal.run({ remainingMs: () => 60_000 });

    // Assert
    expect(requested.code).toBe(1);
    expect(requested.stdout).toContain("renewal requested for 1 host under term");
    expect(requested.stdout).toMatch(/│ web2\.example\.net │ certificate │ \d{4}-\d\d-\d\dT[\d:.]+Z │/);
    expect(requested.stdout).toContain("nope.example.net: not requested: not a provisioned host with a known credential expiry");
    expect(requested.stdout.trimEnd().split("\n").at(-1)).toBe("Finished processing 2 hosts: 1 requested for renewal, 1 not");
    expect(run).toMatchObject({ status: "ran", sent: ["web2.example.net"] });
    expect(rpc.calls.map((call) => call.identity)).toEqual(["web2.example.net"]);
    // The request lasts until its host is back with new credentials; a later run does not send it again.
    expect((await renewalStore.read(SITE)).state.request).toMatchObject({ selection: { identities: ["web2.example.net"] } });
    await renewal.run({ remainingMs: () => 60_000 });
    expect(rpc.calls).toHaveLength(1);
  });

  it("is refused where no renew run carries it out, and status says a request would wait for nothing", async () => {
    // Arrange: a leader whose site has no renew run (renew.broker_urls empty, or the local stack).
    const term = await lead("primary");
    await provisioned("web1.example.net", time.trueTime + 300 * DAY_MS, term);

    // Act
    const refused = await cli("renew", "--all");
    const dryRun = await cli("renew", "--all", "--dry-run");
    const people = await cli("status");

    // Assert
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'choria-provisioner: nothing would send the hosts reprovision: no renew run has been seen on site "ops": the leader\'s renew function carries out requests, and it runs only where renew.broker_urls names the main broker\n',
    );
    expect((await renewalStore.read(SITE)).version).toBe(0);
    expect(dryRun.code).toBe(0);
    expect(dryRun.stdout).toContain("Without --dry-run this would be refused: nothing would send the hosts reprovision");
    expect(dryRun.stdout.trimEnd().split("\n").at(-1)).toBe("Finished processing 1 host: 1 would be renewed, 0 not; dry run, nothing was requested");
    expect(people.stdout).toContain('renew runs: NOT RUNNING: no renew run has been seen on site "ops"');
  });

  it("is refused once the renew runs stopped, and status shows an open request as stalled", async () => {
    // Arrange: the last run was 10 minutes ago; a request was written since.
    const term = await lead("primary");
    await provisioned("web1.example.net", time.trueTime + 300 * DAY_MS, term);
    const lastRun = { at: time.trueTime - 10 * 60_000, term };
    await renewalStore.write(SITE, { inFlight: {}, recent: [], sends: [], lastRun, request: { term, requestedAt: time.trueTime, selection: { all: true } } }, 0);

    // Act
    const refused = await cli("renew", "--identity", "web1.example.net");
    const people = await cli("status");

    // Assert
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`the last renew run on site "ops" was 10 minutes ago (term ${term}): the renew function is not running`);
    expect(people.stdout).toContain(`operator request of term ${term}: 1 host still to send, but no renew run is sending them`);
  });

  it("is refused on a standby, naming the leader", async () => {
    // Arrange
    await lead("secondary");

    // Act
    const result = await cli("renew", "--all");

    // Assert
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("deployment primary does not lead site");
    expect((await renewalStore.read(SITE)).version).toBe(0);
  });

  it("is refused on a paused deployment", async () => {
    // Arrange
    await lead("primary");
    await new DynamoDbPauseStore({ client: dynamo, tableName: `${prefix()}-lease` }).write({ site: SITE, deploymentId: "primary", paused: true, changedAt: time.trueTime });

    // Act
    const result = await cli("renew", "--all");

    // Assert
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("deployment primary is paused");
  });

  it("takes exactly one selection", async () => {
    const result = await cli("renew", "--all", "--due-within", "7d");
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("renew takes exactly one of --identity, --due-within and --all");
  });

  it("resumes renewal after it paused itself, and status says why it had paused", async () => {
    // Arrange
    const term = await lead("primary");
    await provisioned("web1.example.net", time.trueTime + 3 * HOUR_MS, term);
    const reason = "6 of the last 20 renewals failed (more than 5 of 20); last: web9.example.net: Incorrect provision token supplied";
    await renewalStore.write(SITE, { inFlight: {}, recent: [], sends: [], paused: { reason, at: time.trueTime } }, 0);

    // Act
    const before = await cliJson<DeploymentStatus>("status");
    const people = await cli("status");
    const resumed = await cli("renew", "--resume");

    // Assert
    expect(before.renewal).toMatchObject({ paused: { reason }, expiry: { known: 1, within24h: 1 } });
    expect(people.stdout).toContain(`renewal: PAUSED since`);
    expect(people.stdout).toMatch(/│ web1\.example\.net │ certificate │ in 3h +│/);
    expect(resumed.stdout).toContain(`renewal resumed (it had paused because ${reason})`);
    expect((await renewalStore.read(SITE)).state.paused).toBeUndefined();
  });
});
