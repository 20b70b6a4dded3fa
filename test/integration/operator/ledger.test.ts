/**
 * The issuance ledger on DynamoDB Local: its records in the site's admission table (their own
 * partition per identity, the `ledger-by-day` index, the TTL attribute), a write whose answer was
 * lost sent again landing on itself, and `choria-provisioner history` and `issued` as docs/audit.md
 * tells an operator to run them, with the tables named as serverless.yml names them for a stage.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createProvisionerTables } from "../../../dev/local/resources";
import { LOCAL_AWS } from "../../../dev/local/services";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { IssuanceHistory, IssuedReport } from "../../../lib/app/operator/issuance-operator";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { DynamoDbIssuanceLedger } from "../../../lib/dynamodb/issuance-ledger";
import { systemClock } from "../../../lib/ports/clock";
import type { Issuance } from "../../../lib/ports/issuance-ledger";
import { startDelayProxy } from "../../support/delay-proxy";
import { RecordingMetrics } from "../../support/fakes";
import { startLocalAws, type LocalAws } from "../../support/aws";
import { operatorCli } from "../../support/operator-cli";

const SITE = "audit";
const DAY_MS = 86_400_000;
const RETENTION_MS = 400 * DAY_MS;
let aws: LocalAws;
let dynamo: DynamoDBClient;
let stage: string;
let ledger: DynamoDbIssuanceLedger;
let registry: AdmissionRegistry;

const table = () => `choria-provisioner-${stage}-admission`;
const { cli, cliJson } = operatorCli(() => ({ stage, site: SITE, sqsUrl: "http://127.0.0.1:1", clock: systemClock }));

/** A record as the provision function writes it: a certificate from `ca` and a server JWT. */
function issuance(identity: string, issuedAt: number, n: number, ca = "CN=Choria Site CA, O=Example"): Issuance {
  const credentialId = `2rfFowz6d0XDFnTp3RzreqoDB${n}`;
  return {
    site: SITE,
    identity,
    credentialId,
    issuedAt,
    kind: n === 1 ? "provision" : "renewal",
    term: 7,
    deploymentId: "east",
    expiresAt: issuedAt + RETENTION_MS,
    verdictSha256: "a".repeat(64),
    certificate: { serial: `0${n}AF`, sha256: `AB:CD:0${n}`, issuer: ca, subject: `CN=${identity}`, notAfter: issuedAt + 30 * DAY_MS, keySha256: "b".repeat(64) },
    serverJwt: { jti: credentialId, expiresAt: issuedAt + 20 * DAY_MS, issuer: "Choria Provisioner", keySha256: "c".repeat(64) },
  };
}

/** The host's registry entry holding `credentialId` live, as the provision function leaves it. */
async function provisionedWith(identity: string, credentialId: string): Promise<void> {
  const begun = await registry.begin((await registry.admit(identity, "discovery", 1))!, 1);
  if (begun.status !== "claimed") throw new Error(`could not claim ${identity}`);
  await registry.complete(begun.claim, "provisioned", { expiresAt: Date.now() + 20 * DAY_MS, kind: "server_jwt", issuedAt: Date.now(), credentialId });
}

beforeAll(async () => {
  aws = await startLocalAws();
  dynamo = aws.dynamo;
});

beforeEach(async () => {
  stage = `l${randomUUID().slice(0, 8)}`;
  await createProvisionerTables(dynamo, { lease: `choria-provisioner-${stage}-lease`, admission: table() });
  ledger = new DynamoDbIssuanceLedger({ client: dynamo, tableName: table() });
  registry = new AdmissionRegistry({ site: SITE, intervalMs: 60_000 }, { store: new DynamoDbAdmissionStore({ client: dynamo, tableName: table() }), metrics: new RecordingMetrics(), clock: systemClock });
});

afterAll(async () => {
  await aws?.stop();
});

describe("the issuance ledger in the site's admission table", () => {
  it("keeps each record in the identity's own partition, with the day index and the retention's TTL, out of the site's host listing", async () => {
    // Arrange
    const now = Date.now();
    const record = issuance("web12.example.net", now, 1);

    // Act
    await ledger.record(record);
    await provisionedWith("web12.example.net", record.credentialId);

    // Assert: the item as stored, and what reads it back.
    const { Item } = await dynamo.send(new GetItemCommand({ TableName: table(), Key: { site: { S: `ledger#${SITE}#web12.example.net` }, identity: { S: record.credentialId } } }));
    expect(Item?.ledgerDay?.S).toBe(`${SITE}#${new Date(now).toISOString().slice(0, 10)}`);
    expect(Item?.ttl?.N).toBe(String(Math.ceil((now + RETENTION_MS) / 1000)));
    expect(await ledger.history(SITE, "web12.example.net")).toEqual([record]);
    expect((await new DynamoDbAdmissionStore({ client: dynamo, tableName: table() }).listSite(SITE)).map((row) => row.identity)).toEqual(["web12.example.net"]);
  });

  it("lands a record written again after its answer was lost on the first: one record", async () => {
    // Arrange: a client, not retrying, whose first Put lands but whose answer comes after it gave up.
    const record = issuance("web13.example.net", Date.now(), 1);
    const target = new URL(aws.dynamoEndpoint);
    const proxy = await startDelayProxy({ host: target.hostname, port: Number(target.port) });
    const impatient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: proxy.endpoint, maxAttempts: 1, requestHandler: { requestTimeout: 1_000, throwOnRequestTimeout: true } });
    const lossyLedger = new DynamoDbIssuanceLedger({ client: impatient, tableName: table() });
    proxy.holdNextAnswer("PutItem", 3_000);

    // Act
    const first = await lossyLedger.record(record).then(
      () => "answered",
      () => "lost",
    );
    await lossyLedger.record(record);
    impatient.destroy();
    await proxy.close();

    // Assert
    expect(first).toBe("lost");
    expect(proxy.held).toBe(1);
    expect(await ledger.history(SITE, "web13.example.net")).toEqual([record]);
  });
});

describe("choria-provisioner history and issued", () => {
  it("history lists an identity's credentials oldest first, the registry's one marked live", async () => {
    // Arrange: provisioned, then renewed twice; the registry holds the last.
    const now = Date.now();
    const records = [issuance("web12.example.net", now - 60 * DAY_MS, 1), issuance("web12.example.net", now - 30 * DAY_MS, 2), issuance("web12.example.net", now - DAY_MS, 3)];
    for (const record of [...records].reverse()) await ledger.record(record);
    await ledger.record(issuance("other.example.net", now, 4));
    await provisionedWith("web12.example.net", records[2]!.credentialId);

    // Act
    const json = await cliJson<IssuanceHistory>("history", "web12.example.net");
    const human = await cli("history", "web12.example.net");

    // Assert
    expect(json.liveCredentialId).toBe(records[2]!.credentialId);
    expect(json.issuances.map((record) => [record.credentialId, record.kind, record.live])).toEqual([
      [records[0]!.credentialId, "provision", false],
      [records[1]!.credentialId, "renewal", false],
      [records[2]!.credentialId, "renewal", true],
    ]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("web12.example.net: 3 credentials issued");
    expect(human.stdout).toContain("03AF");
    expect(human.stdout.split("\n").filter((line) => line.includes("live")).join("\n")).toContain(records[2]!.credentialId);
  });

  it("issued --since reads the days asked for, and --ca keeps what a matching issuer signed", async () => {
    // Arrange: one record 40 days ago, one 10 days ago from another CA, one an hour ago.
    const now = Date.now();
    await ledger.record(issuance("old.example.net", now - 40 * DAY_MS, 1));
    await ledger.record(issuance("mid.example.net", now - 10 * DAY_MS, 2, "CN=Legacy CA"));
    await ledger.record(issuance("new.example.net", now - 3_600_000, 3));

    // Act
    const month = await cliJson<IssuedReport>("issued", "--since", "30d");
    const legacy = await cliJson<IssuedReport>("issued", "--since", "30d", "--ca", "legacy ca");
    const human = await cli("issued", "--since", "30d", "--ca", "CN=Choria Site CA");

    // Assert
    expect(month.issuances.map((record) => record.identity)).toEqual(["mid.example.net", "new.example.net"]);
    expect(legacy.issuances.map((record) => record.identity)).toEqual(["mid.example.net"]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("1 credential issued since");
    expect(human.stdout).toContain("new.example.net");
    expect(human.stdout).not.toContain("mid.example.net");
  });

  it("refuses a missing or malformed --since and a history without one identity, naming what is wrong (exit 2)", async () => {
    for (const [args, message] of [
      [["issued"], /issued needs --since/],
      [["issued", "--since", "soon"], /--since soon is not a duration/],
      [["issued", "--since", "30d", "--ca", " "], /--ca needs the text of an issuer/],
      [["history"], /history takes one identity/],
      [["history", "a", "b"], /history takes one identity/],
    ] as const) {
      const result = await cli(...args);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });
});
