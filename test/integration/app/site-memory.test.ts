/**
 * One site, one memory, checked at run time against DynamoDB Local: deployments that share the
 * site's admission table report one registry id; a deployment on another table (a wrong name that
 * package time cannot see) is found by every other one, through the site's lease table.
 */
import { randomUUID } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SiteMemoryCheck } from "../../../lib/app/site-memory";
import { DynamoDbSiteRegistries } from "../../../lib/dynamodb/site-registries";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { LOCAL_AWS } from "../../../dev/local/services";
import { createAdmissionTable, createProvisionerTables } from "../../../dev/local/resources";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../../support/fakes";

const RUN = randomUUID().slice(0, 8);
const TABLES = { lease: `lease-${RUN}`, site: `admission-${RUN}`, wrong: `admission-wrong-${RUN}` };
let client: DynamoDBClient;

beforeAll(async () => {
  client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: inject("dynamoEndpoint") });
  await createProvisionerTables(client, { lease: TABLES.lease, admission: TABLES.site });
  await createAdmissionTable(client, TABLES.wrong);
});
afterAll(() => client?.destroy());

function deployment(deploymentId: string, admissionTable: string, site: string, clock: VirtualClock) {
  const registries = new DynamoDbSiteRegistries({ site, admission: { client, tableName: admissionTable }, lease: { client, tableName: TABLES.lease } });
  const metrics = new RecordingMetrics();
  const logger = new RecordingLogger();
  return { registries, metrics, logger, check: new SiteMemoryCheck({ deploymentId, registries, clock, logger, metrics }) };
}

describe("every deployment of a site on the site's one registry", () => {
  it("is quiet while the deployments share the admission table, whichever looks first", async () => {
    // Arrange
    const site = `shared-${randomUUID()}`;
    const clock = new VirtualClock(Date.now());
    const leader = deployment("lon-a", TABLES.site, site, clock);
    const standby = deployment("lon-b", TABLES.site, site, clock);

    // Act: both make the id at once, then both report.
    const [idA, idB] = await Promise.all([leader.registries.ownId(), standby.registries.ownId()]);
    const found = [await leader.check.check(), await standby.check.check()];

    // Assert
    expect(idA).toBe(idB);
    expect(found).toEqual([[], []]);
    expect(leader.metrics.of(EXTRA_METRIC.registryMismatch).at(-1)?.value).toBe(0);
    expect(standby.logger.at("error")).toEqual([]);
  });

  it("names, on each side, a deployment that uses another admission table, and forgets one gone for 10 minutes", async () => {
    // Arrange: the standby was given an existing table of the right shape, but not the site's.
    const site = `split-${randomUUID()}`;
    const clock = new VirtualClock(Date.now());
    const leader = deployment("lon-a", TABLES.site, site, clock);
    const standby = deployment("lon-b", TABLES.wrong, site, clock);

    // Act: each warm container compares every 5 minutes, and says what it last found in between.
    await leader.check.check();
    const seenByStandby = await standby.check.check();
    const beforeLeaderLooksAgain = await leader.check.check();
    clock.advance(5 * 60_000);
    const seenByLeader = await leader.check.check();
    clock.advance(11 * 60_000);
    const afterStandbyGone = await leader.check.check();

    // Assert
    expect(seenByStandby).toEqual(["lon-a"]);
    expect(beforeLeaderLooksAgain).toEqual([]);
    expect(seenByLeader).toEqual(["lon-b"]);
    expect(leader.metrics.of(EXTRA_METRIC.registryMismatch).map((sample) => sample.value)).toEqual([0, 0, 1, 0]);
    expect(leader.logger.at("error").map((record) => record.message)).toEqual([expect.stringContaining("deployment lon-b of this site uses another admission registry than this one")]);
    expect(afterStandbyGone).toEqual([]);
  });

  it("keeps checking when the store fails, and says it could not", async () => {
    // Arrange
    const clock = new VirtualClock(Date.now());
    const lost = deployment("lon-a", `missing-${RUN}`, `lost-${randomUUID()}`, clock);

    // Act
    const found = await lost.check.check();

    // Assert
    expect(found).toEqual([]);
    expect(lost.logger.at("warn").map((record) => record.message)).toContain("could not check that every deployment of the site uses the site's one registry");
  });
});
