/**
 * The package-time rules for where a site's two shared tables live (config/deployment.cjs
 * `siteTables`): the lease and the admission table. Which layouts are accepted and which are
 * refused, each refusal naming the param; a stack that joins a site must name both of its tables.
 */
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
interface Topology {
  layout: "own" | "own-global" | "external";
  tableName: string;
  tableArn: unknown;
  tableRegion: string;
  replicas?: string[];
  witnesses?: string[];
}
type Kind = "lease" | "admission";
type TableParams = Record<"table" | "replicaRegions" | "witnessRegion" | "consistency", string>;
type Tables = Record<Kind, Topology>;
const { siteTables, siteTableResources } = require("../../../config/deployment.cjs") as {
  siteTables: (input: { params: Record<Kind, TableParams>; prefix: string; region: string; standby?: boolean; pausedAlarm?: boolean }) => Tables;
  siteTableResources: (tables: Tables) => { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
};

/** Params as the stack is given them (`leaseTable`, `admissionReplicaRegions`, ...). */
type Given = Partial<Record<`${Kind}${"Table" | "ReplicaRegions" | "WitnessRegion" | "MultiRegionConsistency"}`, string>>;

function tablesOf(given: Given, { region = "eu-west-1", standby = false, pausedAlarm = true } = {}): Tables {
  const of = (kind: Kind): TableParams => ({
    table: given[`${kind}Table`] ?? "",
    replicaRegions: given[`${kind}ReplicaRegions`] ?? "",
    witnessRegion: given[`${kind}WitnessRegion`] ?? "",
    consistency: given[`${kind}MultiRegionConsistency`] ?? "STRONG",
  });
  return siteTables({ params: { lease: of("lease"), admission: of("admission") }, prefix: "choria-provisioner-prod", region, standby, pausedAlarm });
}

const SITE_LEASE = "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-provisioner-prod-lease";
const SITE_ADMISSION = "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-provisioner-prod-admission";

describe("a stack joining a site", () => {
  it("refuses a standby without the site's lease table (it would lead on a table of its own)", () => {
    expect(() => tablesOf({ admissionTable: SITE_ADMISSION }, { standby: true })).toThrow(
      /standby \(param standby=true\) but param leaseTable is empty: it would create a lease table of its own/,
    );
  });

  it("refuses a standby without the site's admission table, saying what to pass", () => {
    expect(() => tablesOf({ leaseTable: SITE_LEASE }, { standby: true })).toThrow(
      /standby \(param standby=true\) but param admissionTable is empty: it would keep a registry of its own, and after a failover it would renew none of the hosts the other deployments provisioned\. Set admissionTable to the name or ARN of the site's admission table \(the AdmissionTableName output/,
    );
  });

  it("refuses a stack whose paused alarm is off (as only a standby's is) without the site's tables", () => {
    expect(() => tablesOf({}, { pausedAlarm: false })).toThrow(
      /param pausedAlarm=false, which only a standby needs, but param leaseTable is empty: it would create a lease table of its own.*a standby also sets standby=true/,
    );
    expect(() => tablesOf({ leaseTable: SITE_LEASE }, { pausedAlarm: false })).toThrow(/param admissionTable is empty/);
    expect(tablesOf({ leaseTable: SITE_LEASE, admissionTable: SITE_ADMISSION }, { pausedAlarm: false }).lease.layout).toBe("external");
  });

  it("refuses a stack that names the site's lease table but not its admission table, standby or not", () => {
    expect(() => tablesOf({ leaseTable: SITE_LEASE })).toThrow(/param leaseTable names the site's existing lease table but param admissionTable is empty/);
  });

  it("accepts a standby naming both, and creates neither table", () => {
    const tables = tablesOf({ leaseTable: SITE_LEASE, admissionTable: SITE_ADMISSION }, { standby: true });

    expect(tables.lease).toEqual({ layout: "external", tableName: SITE_LEASE, tableArn: SITE_LEASE, tableRegion: "eu-west-1" });
    expect(tables.admission).toEqual({ layout: "external", tableName: SITE_ADMISSION, tableArn: SITE_ADMISSION, tableRegion: "eu-west-1" });
    expect(siteTableResources(tables).Resources).toEqual({});
  });
});

describe.each(["lease", "admission"] as const)("the %s table", (kind) => {
  const topology = (given: Given, region?: string) => tablesOf(given, region ? { region } : {})[kind];
  const param = (name: string) => `${kind}${name}` as keyof Given;

  it(`owns <prefix>-${kind} in the stack's Region by default`, () => {
    expect(topology({})).toEqual({
      layout: "own",
      tableName: `choria-provisioner-prod-${kind}`,
      tableArn: { "Fn::Sub": `arn:\${AWS::Partition}:dynamodb:\${AWS::Region}:\${AWS::AccountId}:table/choria-provisioner-prod-${kind}` },
      tableRegion: "eu-west-1",
    });
  });

  it("uses an existing table by ARN in another Region and account, taking the Region from the ARN", () => {
    const arn = `arn:aws:dynamodb:us-east-2:210987654321:table/choria-${kind}`;
    // A stack naming the site's lease must name its admission table too, so both are given.
    const given = { leaseTable: SITE_LEASE, admissionTable: SITE_ADMISSION, [param("Table")]: arn };

    expect(topology(given)).toEqual({ layout: "external", tableName: arn, tableArn: arn, tableRegion: "us-east-2" });
  });

  it("uses an existing table by name in this account and Region", () => {
    const result = topology({ leaseTable: "choria-lease", admissionTable: "choria-admission" });

    expect(result.layout).toBe("external");
    expect(result.tableName).toBe(`choria-${kind}`);
    expect(JSON.stringify(result.tableArn)).toContain(`:table/choria-${kind}`);
  });

  it("declares an MRSC global table: three replicas, or two replicas and a witness", () => {
    expect(topology({ [param("ReplicaRegions")]: "us-east-2,us-west-2" }, "us-east-1")).toMatchObject({
      layout: "own-global",
      replicas: ["us-east-1", "us-east-2", "us-west-2"],
      witnesses: [],
    });
    expect(topology({ [param("ReplicaRegions")]: "eu-west-2", [param("WitnessRegion")]: "eu-west-3" })).toMatchObject({
      replicas: ["eu-west-1", "eu-west-2"],
      witnesses: ["eu-west-3"],
    });
  });

  it.each([
    [{ MultiRegionConsistency: "EVENTUAL", ReplicaRegions: "eu-west-2,eu-west-3" }, /MultiRegionConsistency=EVENTUAL.*eventually consistent/],
    [{ ReplicaRegions: "eu-west-2" }, /exactly three Regions/],
    [{ ReplicaRegions: "eu-west-2,eu-west-3,eu-central-1" }, /exactly three Regions/],
    [{ ReplicaRegions: "eu-west-2", WitnessRegion: "eu-west-2" }, /each Region may appear once/],
    [{ WitnessRegion: "eu-west-3" }, /WitnessRegion needs .*ReplicaRegions/],
    [{ ReplicaRegions: "europe,eu-west-3" }, /"europe" is not an AWS Region name/],
  ])("refuses %j, naming the param", (params, message) => {
    const given = Object.fromEntries(Object.entries(params).map(([name, value]) => [param(name), value]));

    expect(() => topology(given)).toThrow(message);
    expect(() => topology(given)).toThrow(new RegExp(kind));
  });

  it.each([
    [{ Table: "choria-x", ReplicaRegions: "eu-west-2,eu-west-3" }, /Table names an existing .* table/],
    [{ Table: "arn:aws:dynamodb:eu-west-1:123456789012:stream/x" }, /Table=.* is not a DynamoDB table ARN/],
    [{ Table: "a b" }, /Table=a b is not a DynamoDB table name/],
  ])("refuses an existing table given as %j", (params, message) => {
    const given: Given = { leaseTable: SITE_LEASE, admissionTable: SITE_ADMISSION };
    for (const [name, value] of Object.entries(params)) given[param(name)] = value;

    expect(() => topology(given)).toThrow(message);
  });
});

describe("site table resources", () => {
  const resources = (given: Given, region?: string) => siteTableResources(tablesOf(given, region ? { region } : {})).Resources;

  it("creates both single-Region tables under the logical ids and type existing stacks hold", () => {
    const created = resources({});

    expect(Object.keys(created).sort()).toEqual(["AdmissionTable", "LeaseTable"]);
    expect(created.LeaseTable!.Type).toBe("AWS::DynamoDB::Table");
    expect(created.AdmissionTable!.Type).toBe("AWS::DynamoDB::Table");
    expect(created.AdmissionTable!.Properties).toMatchObject({
      TableName: "choria-provisioner-prod-admission",
      KeySchema: [
        { AttributeName: "site", KeyType: "HASH" },
        { AttributeName: "identity", KeyType: "RANGE" },
      ],
      TimeToLiveSpecification: { AttributeName: "ttl", Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
  });

  it("creates an MRSC global table for each table given replica Regions, a witness only when one is given", () => {
    const created = resources({ leaseReplicaRegions: "us-east-2,us-west-2", admissionReplicaRegions: "eu-west-2", admissionWitnessRegion: "eu-west-3" }, "us-east-1");

    expect(Object.keys(created).sort()).toEqual(["AdmissionGlobalTable", "LeaseGlobalTable"]);
    expect(created.LeaseGlobalTable!.Properties.MultiRegionConsistency).toBe("STRONG");
    expect(created.LeaseGlobalTable!.Properties).not.toHaveProperty("GlobalTableWitnesses");
    expect(created.AdmissionGlobalTable!.Type).toBe("AWS::DynamoDB::GlobalTable");
    expect(created.AdmissionGlobalTable!.Properties.MultiRegionConsistency).toBe("STRONG");
    expect(created.AdmissionGlobalTable!.Properties.GlobalTableWitnesses).toEqual([{ Region: "eu-west-3" }]);
  });

  it("creates neither table when both are named", () => {
    expect(resources({ leaseTable: SITE_LEASE, admissionTable: SITE_ADMISSION })).toEqual({});
  });
});
