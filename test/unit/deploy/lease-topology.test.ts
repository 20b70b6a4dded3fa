/**
 * The package-time rules for where a site's lease lives (config/deployment.cjs `leaseTopology`):
 * which layouts are accepted and which are refused, each refusal naming the param.
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
const { leaseTopology, leaseResources } = require("../../../config/deployment.cjs") as {
  leaseTopology: (input: { params: Record<string, string>; prefix: string; region: string; standby?: boolean }) => Topology;
  leaseResources: (topology: Topology) => { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
};

const topology = (params: Partial<Record<"leaseTable" | "leaseReplicaRegions" | "leaseWitnessRegion" | "leaseMultiRegionConsistency", string>>, region = "eu-west-1") =>
  leaseTopology({
    params: { leaseTable: "", leaseReplicaRegions: "", leaseWitnessRegion: "", leaseMultiRegionConsistency: "STRONG", ...params },
    prefix: "choria-provisioner-prod",
    region,
  });

describe("lease topology", () => {
  it("refuses a standby stack without leaseTable (it would lead on a table of its own), and accepts it with the site's table", () => {
    const standby = (leaseTable: string) =>
      leaseTopology({ params: { leaseTable, leaseReplicaRegions: "", leaseWitnessRegion: "", leaseMultiRegionConsistency: "STRONG" }, prefix: "p", region: "eu-west-1", standby: true });

    expect(() => standby("")).toThrow(/standby \(param standby=true\) but param leaseTable is empty/);
    expect(standby("choria-provisioner-prod-lease")).toMatchObject({ layout: "external", tableName: "choria-provisioner-prod-lease" });
  });

  it("owns <prefix>-lease in the stack's Region by default", () => {
    expect(topology({})).toEqual({
      layout: "own",
      tableName: "choria-provisioner-prod-lease",
      tableArn: { "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/choria-provisioner-prod-lease" },
      tableRegion: "eu-west-1",
    });
  });

  it("uses an existing table by ARN in another Region and account, taking the Region from the ARN", () => {
    const arn = "arn:aws:dynamodb:us-east-2:210987654321:table/choria-lease";

    expect(topology({ leaseTable: arn })).toEqual({ layout: "external", tableName: arn, tableArn: arn, tableRegion: "us-east-2" });
  });

  it("uses an existing table by name in this account and Region", () => {
    const result = topology({ leaseTable: "choria-lease" });

    expect(result.layout).toBe("external");
    expect(result.tableName).toBe("choria-lease");
    expect(JSON.stringify(result.tableArn)).toContain(":table/choria-lease");
  });

  it("declares an MRSC global table: three replicas, or two replicas and a witness", () => {
    expect(topology({ leaseReplicaRegions: "us-east-2,us-west-2" }, "us-east-1")).toMatchObject({
      layout: "own-global",
      replicas: ["us-east-1", "us-east-2", "us-west-2"],
      witnesses: [],
      tableArn: { "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/choria-provisioner-prod-lease" },
    });
    expect(topology({ leaseReplicaRegions: "eu-west-2", leaseWitnessRegion: "eu-west-3" })).toMatchObject({
      replicas: ["eu-west-1", "eu-west-2"],
      witnesses: ["eu-west-3"],
    });
  });

  it.each([
    [{ leaseMultiRegionConsistency: "EVENTUAL", leaseReplicaRegions: "eu-west-2,eu-west-3" }, /leaseMultiRegionConsistency=EVENTUAL.*eventually consistent/],
    [{ leaseMultiRegionConsistency: "EVENTUAL", leaseTable: "arn:aws:dynamodb:eu-west-2:123456789012:table/choria-lease" }, /leaseMultiRegionConsistency/],
    [{ leaseReplicaRegions: "eu-west-2" }, /exactly three Regions/],
    [{ leaseReplicaRegions: "eu-west-2,eu-west-3,eu-central-1" }, /exactly three Regions/],
    [{ leaseReplicaRegions: "eu-west-2,eu-west-3", leaseWitnessRegion: "eu-central-1" }, /exactly three Regions/],
    [{ leaseReplicaRegions: "eu-west-2", leaseWitnessRegion: "eu-west-2" }, /each Region may appear once/],
    [{ leaseWitnessRegion: "eu-west-3" }, /leaseWitnessRegion needs leaseReplicaRegions/],
    [{ leaseTable: "choria-lease", leaseReplicaRegions: "eu-west-2,eu-west-3" }, /leaseTable names an existing lease table/],
    [{ leaseTable: "arn:aws:dynamodb:eu-west-1:123456789012:stream/x" }, /leaseTable=.* is not a DynamoDB table ARN/],
    [{ leaseTable: "a b" }, /leaseTable=a b is not a DynamoDB table name/],
    [{ leaseReplicaRegions: "europe,eu-west-3" }, /"europe" is not an AWS Region name/],
  ])("refuses %j", (params, message) => {
    expect(() => topology(params)).toThrow(message);
  });
});

describe("lease table resources", () => {
  const resources = (params: Parameters<typeof topology>[0], region?: string) => leaseResources(topology(params, region)).Resources;

  it("creates the single-Region table under the logical id and type existing stacks hold", () => {
    const created = resources({});

    expect(Object.keys(created)).toEqual(["LeaseTable"]);
    expect(created.LeaseTable!.Type).toBe("AWS::DynamoDB::Table");
    expect(created.LeaseTable!.Properties.TableName).toBe("choria-provisioner-prod-lease");
  });

  it("creates only the MRSC global table with leaseReplicaRegions, a witness only when one is given", () => {
    const threeReplicas = resources({ leaseReplicaRegions: "us-east-2,us-west-2" }, "us-east-1");
    const withWitness = resources({ leaseReplicaRegions: "eu-west-2", leaseWitnessRegion: "eu-west-3" });

    expect(Object.keys(threeReplicas)).toEqual(["LeaseGlobalTable"]);
    expect(threeReplicas.LeaseGlobalTable!.Type).toBe("AWS::DynamoDB::GlobalTable");
    expect(threeReplicas.LeaseGlobalTable!.Properties.MultiRegionConsistency).toBe("STRONG");
    expect(threeReplicas.LeaseGlobalTable!.Properties).not.toHaveProperty("GlobalTableWitnesses");
    expect(withWitness.LeaseGlobalTable!.Properties.GlobalTableWitnesses).toEqual([{ Region: "eu-west-3" }]);
  });

  it("creates no lease table when leaseTable names an existing one", () => {
    expect(resources({ leaseTable: "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-lease" })).toEqual({});
    expect(resources({ leaseTable: "choria-lease" })).toEqual({});
  });
});
