/**
 * With the `subnetIds` / `securityGroupIds` params, exactly the functions that connect to the broker
 * run in the VPC (config/deployment.cjs `BROKER_FUNCTIONS`, docs/deploy.md "Running in a VPC"): the
 * list must be the handlers that compose `brokerFunction`, or a function would either lose the broker
 * or sit in the VPC for nothing (needing its endpoints or NAT).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
const ROOT = resolve(import.meta.dirname, "../../..");

interface Statement {
  Sid?: string;
  Effect: string;
  Action: string[];
}
interface Vpcs {
  vpc: Record<string, { subnetIds: string[]; securityGroupIds: string[] } | null>;
  vpcPolicy: Record<string, { PolicyName: string; PolicyDocument: { Statement: Statement[] } }>;
}
const deployment = require("../../../config/deployment.cjs") as {
  FUNCTIONS: string[];
  BROKER_FUNCTIONS: string[];
  functionVpcs: (params: { subnetIds: string[]; securityGroupIds: string[] }) => Vpcs;
};

/** serverless.yml's function name -> its handler file, read from the template source. */
function handlerFiles(): Map<string, string> {
  const yaml = readFileSync(resolve(ROOT, "serverless.yml"), "utf8");
  const files = new Map<string, string>();
  for (const [, name, file] of yaml.matchAll(/^ {2}([A-Za-z]+):\n {4}handler: (handlers\/[a-z-]+)\.handler$/gm)) files.set(name!, `${file}.ts`);
  return files;
}

describe("the functions a VPC holds", () => {
  it("are the functions whose handler connects to the broker", () => {
    const files = handlerFiles();
    expect([...files.keys()].sort()).toEqual([...deployment.FUNCTIONS].sort());
    const reachBroker = [...files].filter(([, file]) => /\bbrokerFunction\(/.test(readFileSync(resolve(ROOT, file), "utf8"))).map(([name]) => name);
    expect([...deployment.BROKER_FUNCTIONS].sort()).toEqual(reachBroker.sort());
  });

  it("with subnets and security groups: the broker functions get the VPC and the network-interface actions, the others neither", () => {
    const vpcs = deployment.functionVpcs({ subnetIds: ["subnet-0a", "subnet-0b"], securityGroupIds: ["sg-0c"] });
    for (const fn of deployment.FUNCTIONS) {
      const broker = deployment.BROKER_FUNCTIONS.includes(fn);
      expect(vpcs.vpc[fn], fn).toEqual(broker ? { subnetIds: ["subnet-0a", "subnet-0b"], securityGroupIds: ["sg-0c"] } : null);
      const [statement] = vpcs.vpcPolicy[fn]!.PolicyDocument.Statement;
      expect(statement!.Effect, fn).toBe(broker ? "Allow" : "Deny");
      expect(statement!.Action).toContain("ec2:CreateNetworkInterface");
    }
  });

  it("without them: no function is in a VPC and every role is denied the network-interface actions", () => {
    const vpcs = deployment.functionVpcs({ subnetIds: [], securityGroupIds: [] });
    for (const fn of deployment.FUNCTIONS) {
      expect(vpcs.vpc[fn], fn).toBeNull();
      expect(vpcs.vpcPolicy[fn]!.PolicyDocument.Statement.map((s) => s.Effect)).toEqual(["Deny"]);
    }
  });
});
