/**
 * `registry merge` against DynamoDB Local: a site whose leader (A) and standby (B) each had their
 * own admission table, merged into A's, the site's one table. The hosts are written by the real
 * registry (A's and B's, each provisioning under its own terms) or, for thousands, as items shaped
 * like its own; every item of both tables is checked afterwards. The use case runs over the
 * production adapter; the last block runs the CLI commands docs/deploy.md shows, as written there.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  BatchWriteItemCommand,
  DeleteTableCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { createAdmissionTable, createLeaseTable } from "../../../dev/local/resources";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { StoredHost } from "../../../lib/admission/merge";
import { RegistryMerge, type RegistryMergeReport } from "../../../lib/app/registry-merge";
import { type RegistryTable } from "../../../lib/app/use-case-ports";
import { createStoreClient } from "../../../lib/aws/clients";
import { DynamoDbRegistryTable } from "../../../lib/dynamodb/registry-copy";
import { DynamoDbRenewalStore } from "../../../lib/dynamodb/renewal-store";
import { emptyRenewalState } from "../../../lib/app/renewal-state";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { DynamoDbPauseStore } from "../../../lib/dynamodb/pause-store";
import { splitCommandLine } from "../../../lib/helper/shellwords";
import { LOCAL_AWS } from "../../../dev/local/services";
import { runCli } from "../../../cli/cli";
import { RecordingMetrics, VirtualClock } from "../../support/fakes";
import { dynamoClient } from "../../support/aws";
import { startDelayProxy } from "../../support/delay-proxy";
import { hostAndPort } from "../../support/stall-proxy";
import { takeLease } from "../../support/operator-cli";

/** The admission store's and the queues' clients give up on an answer after 3 s (lib/aws/clients.ts): held longer, a write's answer is lost. */
const STORE_REQUEST_TIMEOUT_MS = 3_000;

const ROOT = resolve(import.meta.dirname, "../../..");
const SITE = "lon";
const OTHER_SITE = "par";
const DAY_MS = 86_400_000;
const VALIDITY_MS = 90 * DAY_MS;
type Item = Record<string, AttributeValue>;

let dynamo: DynamoDBClient;
let time: VirtualClock;
/** When leader A first provisioned the fleet; B took over 10 days later, A came back 20 days later. */
let t0: number;
let tables: { a: string; b: string };

const host = (index: number) => `web${String(index).padStart(2, "0")}.example.net`;

function registryOn(table: string, site: string): AdmissionRegistry {
  return new AdmissionRegistry(
    { site, intervalMs: 60_000 },
    { store: new DynamoDbAdmissionStore({ client: dynamo, tableName: table }), metrics: new RecordingMetrics(), clock: time },
  );
}

/** The host admitted, claimed and provisioned by the registry under `term`, with credentials issued now. */
async function provision(registry: AdmissionRegistry, identity: string, term: number): Promise<void> {
  const begun = await registry.begin((await registry.admit(identity, "discovery", term))!, term);
  if (begun.status !== "claimed") throw new Error(`could not claim ${identity}: ${begun.status}`);
  await registry.complete(begun.claim, "provisioned", { expiresAt: time.now() + VALIDITY_MS, kind: "certificate", issuedAt: time.now() });
}

/** Every item of `site`'s partition, by identity, read with the SDK directly. */
async function partition(table: string, site: string): Promise<Map<string, Item>> {
  const items = new Map<string, Item>();
  let startKey: Item | undefined;
  do {
    const page = await dynamo.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: "#site = :site",
        ExpressionAttributeNames: { "#site": "site" },
        ExpressionAttributeValues: { ":site": { S: site } },
        ConsistentRead: true,
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of page.Items ?? []) items.set(item.identity?.S ?? "", item);
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return items;
}

/** Every item of the table, each site's included, in key order. */
async function everything(table: string): Promise<Item[]> {
  const items: Item[] = [];
  let startKey: Item | undefined;
  do {
    const page = await dynamo.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: startKey }));
    items.push(...(page.Items ?? []));
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return items.sort((x, y) => `${x.site?.S}/${x.identity?.S}`.localeCompare(`${y.site?.S}/${y.identity?.S}`));
}

function merge(sources: string[] = [tables.b], target: RegistryTable<AttributeValue> = new DynamoDbRegistryTable(dynamo, tables.a)) {
  return new RegistryMerge({ site: SITE, target, sources: sources.map((name) => new DynamoDbRegistryTable(dynamo, name)), clock: time });
}

/** The site's table (A's), with `beforePut` run before each of the merge's puts: a live deployment writing meanwhile. */
function writtenMeanwhile(beforePut: (entry: StoredHost<AttributeValue>, expected: StoredHost<AttributeValue> | undefined) => Promise<void>): RegistryTable<AttributeValue> {
  const target = new DynamoDbRegistryTable(dynamo, tables.a);
  return {
    name: target.name,
    lifetimeAttributes: target.lifetimeAttributes,
    renewal: target.renewal,
    listHosts: (site) => target.listHosts(site),
    readHost: (site, identity) => target.readHost(site, identity),
    putHost: async (entry, expected) => {
      await beforePut(entry, expected);
      return target.putHost(entry, expected);
    },
  };
}

const actions = (report: RegistryMergeReport) => Object.fromEntries(report.hosts.map((line) => [line.identity, line.action]));
const issuedAt = (item: Item | undefined) => Number(item?.credentialsIssuedAt?.N);

/**
 * The two tables as a failover leaves them. A (term 1) provisions web01-web10; B takes over (term
 * 2) and provisions web05 and web08-web12 again or anew, web13 fails; A takes over again (term 3),
 * provisions web05 once more and admits web14. Each site's neighbour `par` has hosts in both
 * tables, and each table has renewal state for `lon`.
 */
async function failedOverSite(): Promise<void> {
  const [a, b] = [registryOn(tables.a, SITE), registryOn(tables.b, SITE)];
  for (let index = 1; index <= 10; index++) await provision(a, host(index), 1);
  await provision(registryOn(tables.a, OTHER_SITE), host(1), 1);
  time.advance(10 * DAY_MS);
  for (const index of [5, 8, 9, 10, 11, 12]) await provision(b, host(index), 2);
  await provision(registryOn(tables.b, OTHER_SITE), host(1), 2);
  await provision(registryOn(tables.b, OTHER_SITE), host(2), 2);
  const failing = await b.begin((await b.admit(host(13), "discovery", 2))!, 2);
  if (failing.status !== "claimed") throw new Error("could not claim web13");
  await b.recordFailure(failing.claim, { step: "helper", reason: "helper: exit 1", failures: 1, park: false });
  time.advance(10 * DAY_MS);
  await provision(a, host(5), 3);
  await a.admit(host(14), "discovery", 3);
  time.advance(5 * DAY_MS);
  const inFlight = (identity: string) => ({ [identity]: { sentAt: time.now() - 60_000, term: 2, expiresAt: t0 + VALIDITY_MS } });
  await new DynamoDbRenewalStore({ client: dynamo, tableName: tables.a }).write(SITE, { ...emptyRenewalState(), inFlight: inFlight(host(2)) }, 0);
  await new DynamoDbRenewalStore({ client: dynamo, tableName: tables.b }).write(
    SITE,
    { ...emptyRenewalState(), inFlight: { ...inFlight(host(9)), ...inFlight(host(2)) }, paused: { reason: "3 of the last 5 renewals failed", at: time.now() } },
    0,
  );
}

beforeAll(() => {
  dynamo = dynamoClient(inject("dynamoEndpoint"));
});

afterAll(() => {
  dynamo?.destroy();
});

describe("registry merge of a leader's and a standby's admission tables", () => {
  beforeEach(async () => {
    const prefix = `merge-${randomUUID().slice(0, 8)}`;
    tables = { a: `${prefix}-a-admission`, b: `${prefix}-b-admission` };
    await Promise.all([createAdmissionTable(dynamo, tables.a), createAdmissionTable(dynamo, tables.b)]);
    // The fleet's history runs from now on: DynamoDB Local applies the TTL, and would delete entries whose expiry had passed.
    t0 = Date.now();
    time = new VirtualClock(t0);
  });

  it("on a dry run reports per host what it would do and writes nothing", async () => {
    // Arrange
    await failedOverSite();
    const before = { a: await everything(tables.a), b: await everything(tables.b) };

    // Act
    const report = await merge().run({ dryRun: true });

    // Assert
    expect(actions(report)).toEqual({
      [host(5)]: "keep",
      [host(8)]: "replace",
      [host(9)]: "replace",
      [host(10)]: "replace",
      [host(11)]: "copy",
      [host(12)]: "copy",
      [host(13)]: "copy",
    });
    expect(report.hosts.find((line) => line.identity === host(5))).toMatchObject({ reason: "target-issued-later", expiresAt: t0 + 20 * DAY_MS + VALIDITY_MS });
    expect(report.renewal).toEqual([{ from: tables.b, action: "update", addedInFlight: [host(9)], pausedFromSource: true }]);
    expect(report).toMatchObject({ dryRun: true, nothingToDo: false, counts: { copy: 3, replace: 3, keep: 1, "fill-expiry": 0, gaveUp: 0 } });
    expect(await everything(tables.a)).toEqual(before.a);
    expect(await everything(tables.b)).toEqual(before.b);
  });

  it("keeps every host with the expiry of its latest credentials, and touches no other site", async () => {
    // Arrange
    await failedOverSite();
    const a = await partition(tables.a, SITE);
    const b = await partition(tables.b, SITE);
    const otherSite = { a: await partition(tables.a, OTHER_SITE), source: await everything(tables.b) };

    // Act
    const report = await merge().run({ dryRun: false });

    // Assert: each item whole, as the table whose credentials were issued later holds it.
    const merged = await partition(tables.a, SITE);
    const expected = new Map(a);
    for (const index of [8, 9, 10, 11, 12, 13]) expected.set(host(index), b.get(host(index))!);
    expect([...merged.keys()].sort()).toEqual([...Array(14).keys()].map((index) => host(index + 1)));
    expect(merged).toEqual(expected);
    for (const index of [1, 2, 3, 4, 6, 7]) expect(issuedAt(merged.get(host(index)))).toBe(t0);
    expect(issuedAt(merged.get(host(5)))).toBe(t0 + 20 * DAY_MS);
    for (const index of [8, 9, 10, 11, 12]) expect(issuedAt(merged.get(host(index)))).toBe(t0 + 10 * DAY_MS);
    expect(merged.get(host(13))?.state?.S).toBe("failed");
    expect(merged.get(host(14))?.state?.S).toBe("queued");
    expect(report).toMatchObject({ dryRun: false, counts: { copy: 3, replace: 3, keep: 1, gaveUp: 0 } });
    expect(await partition(tables.a, OTHER_SITE)).toEqual(otherSite.a);
    expect(await everything(tables.b)).toEqual(otherSite.source);
    const renewal = await new DynamoDbRenewalStore({ client: dynamo, tableName: tables.a }).read(SITE);
    expect(renewal.version).toBe(2);
    expect(Object.keys(renewal.state.inFlight).sort()).toEqual([host(2), host(9)]);
    expect(renewal.state.inFlight[host(2)]).toMatchObject({ term: 2 });
    expect(renewal.state.paused).toMatchObject({ reason: "3 of the last 5 renewals failed" });
  });

  it("copies renewal's state into a target that has none, without the source's mark of its last renew run", async () => {
    // Arrange: B's renew runs ran over B's table a moment ago; A has no renewal state.
    const inFlight = { [host(3)]: { sentAt: time.now() - 60_000, term: 2, expiresAt: t0 + VALIDITY_MS } };
    await new DynamoDbRenewalStore({ client: dynamo, tableName: tables.b }).write(SITE, { ...emptyRenewalState(), inFlight, lastRun: { at: time.now(), term: 2 } }, 0);

    // Act
    const report = await merge().run({ dryRun: false });

    // Assert: nothing says a renew run goes over A's table, so a renew request there is not taken for carried out.
    const copied = await new DynamoDbRenewalStore({ client: dynamo, tableName: tables.a }).read(SITE);
    expect(report.renewal).toEqual([{ from: tables.b, action: "copy", addedInFlight: [], pausedFromSource: false }]);
    expect(copied.state.inFlight).toEqual(inFlight);
    expect(copied.state.lastRun).toBeUndefined();
  });

  it("changes nothing when run again: the dry run after it has nothing to do", async () => {
    // Arrange
    await failedOverSite();
    await merge().run({ dryRun: false });
    const after = await everything(tables.a);

    // Act
    const dryRun = await merge().run({ dryRun: true });
    const again = await merge().run({ dryRun: false });

    // Assert
    expect(dryRun.nothingToDo).toBe(true);
    expect(new Set(dryRun.hosts.map((line) => line.action))).toEqual(new Set(["keep"]));
    expect(dryRun.renewal).toEqual([{ from: tables.b, action: "keep", addedInFlight: [], pausedFromSource: false }]);
    expect(again).toMatchObject({ nothingToDo: true, counts: { copy: 0, replace: 0, "fill-expiry": 0, keep: 7, gaveUp: 0 } });
    expect(await everything(tables.a)).toEqual(after);
  });

  it("never overwrites what the live leader writes during the merge: the host is read and decided again", async () => {
    // Arrange: A provisions web09 anew, and claims web10, just before the merge writes each.
    await failedOverSite();
    const a = registryOn(tables.a, SITE);
    let web10Claim: Awaited<ReturnType<AdmissionRegistry["begin"]>> | undefined;
    const racing = writtenMeanwhile(async (entry, expected) => {
      if (entry.identity === host(9) && expected?.credentials?.issuedAt === t0) await provision(a, host(9), 3);
      if (entry.identity === host(10) && web10Claim === undefined) web10Claim = await a.begin((await a.admit(host(10), "discovery", 3))!, 3);
    });

    // Act
    const report = await merge([tables.b], racing).run({ dryRun: false });
    if (web10Claim?.status !== "claimed") throw new Error("A could not claim web10");
    await a.complete(web10Claim.claim, "provisioned", { expiresAt: time.now() + VALIDITY_MS, kind: "certificate", issuedAt: time.now() });

    // Assert
    const lines = Object.fromEntries(report.hosts.map((line) => [line.identity, line]));
    expect(lines[host(9)]).toMatchObject({ action: "keep", reason: "target-issued-later", retries: 1, expiresAt: time.now() + VALIDITY_MS });
    expect(lines[host(10)]).toMatchObject({ action: "fill-expiry", reason: "target-claimed", retries: 1 });
    expect(report.counts.gaveUp).toBe(0);
    const merged = await partition(tables.a, SITE);
    expect(issuedAt(merged.get(host(9)))).toBe(time.now());
    expect(merged.get(host(9))?.term?.N).toBe("3");
    expect(issuedAt(merged.get(host(10)))).toBe(time.now());
    expect(merged.get(host(10))?.state?.S).toBe("provisioned");
    expect(merged.get(host(10))?.claimToken).toBeUndefined();
  });

  it("gives a host up, reported and unwritten, when the target changes under every write, and merges it on the next run", async () => {
    // Arrange: a live renew run marks web08 again before each of the merge's writes.
    await failedOverSite();
    let marks = 0;
    const busy = writtenMeanwhile(async (entry) => {
      if (entry.identity !== host(8)) return;
      await dynamo.send(
        new UpdateItemCommand({
          TableName: tables.a,
          Key: { site: { S: SITE }, identity: { S: host(8) } },
          UpdateExpression: "SET renewalRetryAt = :at, renewalAttempts = :attempts",
          ExpressionAttributeValues: { ":at": { N: String(time.now() + ++marks * 60_000) }, ":attempts": { N: String(marks) } },
        }),
      );
    });

    // Act
    const report = await merge([tables.b], busy).run({ dryRun: false });
    const marked = (await partition(tables.a, SITE)).get(host(8));
    const next = await merge().run({ dryRun: false });

    // Assert
    expect(report.hosts.find((line) => line.identity === host(8))).toMatchObject({ action: "replace", retries: 4, gaveUp: true });
    expect(report.counts).toMatchObject({ replace: 2, gaveUp: 1 });
    expect(marks).toBe(4);
    expect(marked?.renewalAttempts?.N).toBe("4");
    expect(issuedAt(marked)).toBe(t0);
    expect(next.hosts.find((line) => line.identity === host(8))).toMatchObject({ action: "replace", retries: 0 });
    expect((await partition(tables.a, SITE)).get(host(8))).toEqual((await partition(tables.b, SITE)).get(host(8)));
  });

  it("merges several sources in turn, a dry run planning each against what the earlier ones would leave", async () => {
    // Arrange: a third deployment's table, C, provisioned web08 after B and web15 that nobody else knows.
    await failedOverSite();
    const c = `${tables.b.replace(/-b-admission$/, "")}-c-admission`;
    await createAdmissionTable(dynamo, c);
    time.advance(DAY_MS);
    for (const index of [8, 15]) await provision(registryOn(c, SITE), host(index), 4);

    // Act
    const dryRun = await merge([tables.b, c]).run({ dryRun: true });
    const applied = await merge([tables.b, c]).run({ dryRun: false });
    const again = await merge([tables.b, c]).run({ dryRun: true });

    // Assert
    const plan = dryRun.hosts.filter((line) => line.identity === host(8)).map((line) => [line.from, line.action]);
    expect(plan).toEqual([
      [tables.b, "replace"],
      [c, "replace"],
    ]);
    expect(dryRun.hosts.find((line) => line.from === c && line.identity === host(15))).toMatchObject({ action: "copy" });
    expect(applied.hosts.map((line) => [line.from, line.identity, line.action])).toEqual(dryRun.hosts.map((line) => [line.from, line.identity, line.action]));
    expect(applied.renewal.map((line) => line.action)).toEqual(["update", "none"]);
    const merged = await partition(tables.a, SITE);
    expect(merged.get(host(8))).toEqual((await partition(c, SITE)).get(host(8)));
    expect(merged.get(host(15))).toEqual((await partition(c, SITE)).get(host(15)));
    expect(again.nothingToDo).toBe(true);
  });

  it("reads back a write whose answer was lost, and reports it as done", async () => {
    // Arrange: the target's client is the CLI's (a request timeout, one retry); DynamoDB applies web11's copy but its answer comes late.
    await failedOverSite();
    const proxy = await startDelayProxy(hostAndPort(inject("dynamoEndpoint")));
    const client = createStoreClient({ ...LOCAL_AWS, endpoint: proxy.endpoint });
    try {
      proxy.holdNextAnswer(host(11), STORE_REQUEST_TIMEOUT_MS + 1_000);

      // Act
      const report = await merge([tables.b], new DynamoDbRegistryTable(client, tables.a)).run({ dryRun: false });

      // Assert
      expect(proxy.held).toBe(1);
      expect(report.hosts.find((line) => line.identity === host(11))).toMatchObject({ action: "copy", retries: 0 });
      expect(report.counts).toMatchObject({ copy: 3, replace: 3, keep: 1, gaveUp: 0 });
      expect((await partition(tables.a, SITE)).get(host(11))).toEqual((await partition(tables.b, SITE)).get(host(11)));
    } finally {
      client.destroy();
      await proxy.close();
    }
  });

  it("merges thousands of hosts a page at a time, each with the expiry of its latest credentials", { timeout: 180_000 }, async () => {
    // Arrange: A provisioned node-0000..2999; B has 0000..0999 provisioned later, 1000..2999 earlier, 3000..3999 only it.
    const name = (index: number) => `node-${String(index).padStart(4, "0")}.example.net`;
    await seed(tables.a, [...Array(3_000).keys()].map((index) => provisionedItem(name(index), t0, 1)));
    await seed(
      tables.b,
      [...Array(4_000).keys()].map((index) => provisionedItem(name(index), index < 1_000 || index >= 3_000 ? t0 + 10 * DAY_MS : t0 - 10 * DAY_MS, 2)),
    );
    const onePage = await dynamo.send(
      new QueryCommand({ TableName: tables.b, KeyConditionExpression: "#site = :site", ExpressionAttributeNames: { "#site": "site" }, ExpressionAttributeValues: { ":site": { S: SITE } } }),
    );
    const [a, b] = [await partition(tables.a, SITE), await partition(tables.b, SITE)];

    // Act
    const report = await merge().run({ dryRun: false });
    const again = await merge().run({ dryRun: true });

    // Assert
    expect(onePage.LastEvaluatedKey).toBeDefined();
    expect(report.counts).toEqual({ copy: 1_000, replace: 1_000, keep: 2_000, "fill-expiry": 0, gaveUp: 0 });
    const merged = await partition(tables.a, SITE);
    expect(merged.size).toBe(4_000);
    for (let index = 0; index < 4_000; index++) {
      const winner = index < 1_000 || index >= 3_000 ? b : a;
      expect(merged.get(name(index)), name(index)).toEqual(winner.get(name(index)));
    }
    expect(again.nothingToDo).toBe(true);
  });
});

/** A provisioned host's item as the registry writes it, credentials issued at `issued` under `term`. */
function provisionedItem(identity: string, issued: number, term: number): Item {
  const expiresAt = issued + VALIDITY_MS + 300_000;
  return {
    site: { S: SITE },
    identity: { S: identity },
    term: { N: String(term) },
    admittedAt: { N: String(issued - 5_000) },
    source: { S: "discovery" },
    state: { S: "provisioned" },
    admissionId: { S: randomUUID() },
    endedClaimToken: { S: randomUUID() },
    heldUntil: { N: String(issued + 60_000) },
    expiresAt: { N: String(expiresAt) },
    ttl: { N: String(Math.ceil(expiresAt / 1000)) },
    credentialsExpireAt: { N: String(issued + VALIDITY_MS) },
    expiryKind: { S: "server_jwt" },
    credentialsIssuedAt: { N: String(issued) },
  };
}

async function seed(table: string, items: Item[]): Promise<void> {
  const batches = [];
  for (let start = 0; start < items.length; start += 25) batches.push(items.slice(start, start + 25));
  for (const batch of batches) {
    let pending: Record<string, Array<{ PutRequest?: { Item?: Item } }>> | undefined = { [table]: batch.map((item) => ({ PutRequest: { Item: item } })) };
    while (pending && Object.keys(pending).length > 0) {
      pending = (await dynamo.send(new BatchWriteItemCommand({ RequestItems: pending as never }))).UnprocessedItems as typeof pending;
    }
  }
}

describe("the commands of docs/deploy.md, \"Merging per-deployment registries\"", () => {
  const names = { lease: "choria-provisioner-prod-lease", target: "choria-provisioner-prod-admission", source: "choria-provisioner-prod-b-admission" };

  /** The `choria-provisioner` lines of the section's example, as argument lists. */
  function documentedCommands(): string[][] {
    const doc = readFileSync(resolve(ROOT, "docs/deploy.md"), "utf8");
    const section = doc.slice(doc.indexOf("### Merging per-deployment registries"));
    const example = section.slice(section.indexOf("```sh"), section.indexOf("```", section.indexOf("```sh") + 5));
    return example
      .split("\n")
      .filter((line) => line.startsWith("choria-provisioner "))
      .map((line) => splitCommandLine(line).slice(1));
  }

  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = "";
    let stderr = "";
    const code = await runCli(args, {
      stdout: (text) => (stdout += text),
      stderr: (text) => (stderr += text),
      env: { DYNAMODB_ENDPOINT: inject("dynamoEndpoint"), USER: "alice" },
      clock: time,
    });
    return { code, stdout, stderr };
  }

  const dropTables = () =>
    Promise.all(Object.values(names).map((table) => dynamo.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined)));

  beforeAll(async () => {
    t0 = Date.now();
    time = new VirtualClock(t0);
    await dropTables();
    await Promise.all([createLeaseTable(dynamo, names.lease), createAdmissionTable(dynamo, names.target), createAdmissionTable(dynamo, names.source)]);
  });

  afterAll(dropTables);

  it("pause the standby, show the merge, merge, resume: every host and expiry ends in the leader's table", async () => {
    // Arrange: lon-a leads; lon-b provisioned web02 later than lon-a and web03 that lon-a never saw.
    const leaseStore = new DynamoDbLeaseStore({ client: dynamo, tableName: names.lease });
    await takeLease(leaseStore, SITE, "lon-a", time.now());
    for (const index of [1, 2]) await provision(registryOn(names.target, SITE), host(index), 1);
    time.advance(10 * DAY_MS);
    for (const index of [2, 3]) await provision(registryOn(names.source, SITE), host(index), 2);
    const source = await partition(names.source, SITE);
    const commands = documentedCommands();

    // Act
    const runs = [];
    for (const args of commands) runs.push(await cli(args));
    const afterwards = await cli(commands[1]!);

    // Assert
    expect(commands.map((args) => args.slice(0, 2).join(" "))).toEqual(["pause --stage", "registry merge", "registry merge", "resume --stage"]);
    expect(runs.map((run) => run.stderr)).toEqual(["", "", "", ""]);
    expect(runs.map((run) => run.code)).toEqual([0, 0, 0, 0]);
    const [, dryRun, apply] = runs;
    expect(dryRun?.stdout).toContain(`dry run: would merge ${names.source} into ${names.target}, site "lon"`);
    expect(dryRun?.stdout).toContain(`${host(2)}: would replace the target's entry: the source's credentials were issued later; credentials expire `);
    expect(dryRun?.stdout).toContain(`${host(3)}: would copy: the target has no entry; credentials expire `);
    expect(dryRun?.stdout).toContain("Finished processing 2 hosts: 1 to copy, 1 to replace, 0 expiries to fill in, 0 kept, 0 not merged");
    expect(dryRun?.stdout).toContain("Nothing was written: run again with --apply to merge.");
    expect(apply?.stdout).toContain(`${host(3)}: copied: the target has no entry`);
    expect(apply?.stdout).toContain("Finished processing 2 hosts: 1 copied, 1 replaced, 0 expiries filled in, 0 kept, 0 not merged");
    expect(afterwards.stdout).toContain("Finished processing 2 hosts: 0 to copy, 0 to replace, 0 expiries to fill in, 2 kept, 0 not merged");
    expect(afterwards.stdout).toContain("Nothing to do");
    const merged = await partition(names.target, SITE);
    expect(merged.get(host(2))).toEqual(source.get(host(2)));
    expect(merged.get(host(3))).toEqual(source.get(host(3)));
    expect(issuedAt(merged.get(host(1)))).toBe(t0);
    const pause = await new DynamoDbPauseStore({ client: dynamo, tableName: names.lease }).read(SITE, "lon-b");
    expect(pause).toMatchObject({ paused: false, by: "alice" });
  });

  it("prints JSON with --json, and refuses no source, a source that is the target and a table that is not there", async () => {
    // Arrange
    const base = ["registry", "merge", "--stage", "prod", "--site", SITE];

    // Act
    const json = await cli([...base, "--from", names.source, "--json"]);
    const itself = await cli([...base, "--from", names.target]);
    const none = await cli(base);
    const missing = await cli([...base, "--from", "choria-provisioner-nope-admission"]);
    const noTarget = await cli(["registry", "merge", "--stage", "nope", "--site", SITE, "--from", names.source]);

    // Assert
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ site: SITE, target: names.target, sources: [names.source], dryRun: true });
    expect(itself).toMatchObject({ code: 1, stderr: expect.stringContaining(`--from ${names.target} is the target itself`) });
    expect(none).toMatchObject({ code: 2, stderr: expect.stringContaining("registry merge needs --from") });
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringContaining('the table "choria-provisioner-nope-admission" does not exist') });
    expect(noTarget).toMatchObject({ code: 1, stderr: expect.stringContaining('the admission table "choria-provisioner-nope-admission" does not exist') });
  });
});
