/**
 * Packages the service once with osls (offline: `sls package` needs no AWS credentials) and checks
 * the generated CloudFormation template: functions, schedules, SQS sources, queues, tables, IAM,
 * alarms and the dashboard.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FUNCTION_NAMES } from "../../lib/config/secrets";
import { stageResourceNames } from "../../lib/aws/stage-resources";
import { EXTRA_METRIC, METRIC } from "../../lib/ports/metric-names";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
const SLS = join(ROOT, "node_modules/.bin/sls");
const require = createRequire(import.meta.url);
/** The functions that connect to the broker: the only ones a VPC holds (test/unit/deploy/vpc-functions.test.ts). */
const { BROKER_FUNCTIONS } = require("../../config/deployment.cjs") as { BROKER_FUNCTIONS: string[] };

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Condition?: string;
  Properties: Json;
}
interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, unknown>;
  Conditions?: Record<string, unknown>;
  Parameters?: Record<string, unknown>;
}
interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
}

const FUNCTIONS = {
  Discover: { handler: "handlers/discover.handler", role: "DiscoverRole" },
  LeaseKeeper: { handler: "handlers/lease-keeper.handler", role: "LeaseKeeperRole" },
  Lifecycle: { handler: "handlers/lifecycle.handler", role: "LifecycleRole" },
  Provision: { handler: "handlers/provision.handler", role: "ProvisionRole" },
  Status: { handler: "handlers/status.handler", role: "StatusRole" },
  Reprovision: { handler: "handlers/reprovision.handler", role: "ReprovisionRole" },
  Release: { handler: "handlers/release.handler", role: "ReleaseRole" },
  Renew: { handler: "handlers/renew.handler", role: "RenewRole" },
} as const;
type FunctionId = keyof typeof FUNCTIONS;

/** Data services: an action on them must name specific resources, never `*`. */
const DATA_SERVICES = ["dynamodb", "sqs", "ssm", "secretsmanager", "kms", "lambda", "logs"];

/**
 * Optional params switched on: KMS key, VPC, alarm topic, a standby without the paused alarm (which
 * must then name the site's tables: a stack with pausedAlarm=false and tables of its own is refused).
 */
const OPTIONAL_PARAMS = {
  secretsKmsKeyArn: "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
  subnetIds: "subnet-0a,subnet-0b",
  securityGroupIds: "sg-0c",
  alarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:provisioner-alarms",
  pausedAlarm: "false",
  leaseTable: "choria-provisioner-prod-lease",
  admissionTable: "choria-provisioner-prod-admission",
};

let workDir: string;
let template: Template;
let optional: Template;
let packagedFiles: string[];
/** A standby using the site's existing lease and admission tables in another account's home Region. */
let external: Template;
/** The stack creating the lease table as a multi-Region strongly consistent global table. */
let global: Template;

const EXTERNAL_LEASE_TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-lease";
const EXTERNAL_ADMISSION_TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/choria-admission";
/** How the roles name the admission table this stack owns. */
const OWN_ADMISSION = "table/choria-provisioner-test-admission";
const LEASE_ROLES = ["DiscoverRole", "LeaseKeeperRole", "LifecycleRole", "ProvisionRole", "StatusRole", "ReprovisionRole", "ReleaseRole"];

async function packageService(into: string, params: Record<string, string>): Promise<Template> {
  const paramArgs = Object.entries(params).map(([key, value]) => `--param=${key}=${value}`);
  await run(SLS, ["package", "--package", into, "--stage", "test", "--region", "eu-west-1", ...paramArgs], {
    cwd: ROOT,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", SLS_TELEMETRY_DISABLED: "1" },
    timeout: 240_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(await readFile(join(into, "cloudformation-template-update-stack.json"), "utf8")) as Template;
}

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "sls-package-"));
  // One at a time: both runs share the esbuild work directory of the service.
  template = await packageService(join(workDir, "default"), {});
  optional = await packageService(join(workDir, "optional"), OPTIONAL_PARAMS);
  packagedFiles = await readdir(join(workDir, "default"));
  external = await packageService(join(workDir, "external"), { leaseTable: EXTERNAL_LEASE_TABLE, admissionTable: EXTERNAL_ADMISSION_TABLE, standby: "true" });
  global = await packageService(join(workDir, "global"), { leaseReplicaRegions: "eu-west-2", leaseWitnessRegion: "eu-west-3" });
}, 600_000);

afterAll(async () => {
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

const resource = (id: string, from: Template = template): Resource => {
  const found = from.Resources[id];
  if (!found) throw new Error(`template has no resource ${id}`);
  return found;
};
const ofType = (type: string, from: Template = template) => Object.entries(from.Resources).filter(([, r]) => r.Type === type);
const lambda = (fn: FunctionId) => resource(`${fn}LambdaFunction`).Properties as Json;
const asList = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);

/** Every statement of a role. */
function statementsOf(roleId: string, from: Template = template): Statement[] {
  const policies = resource(roleId, from).Properties.Policies as Array<{ PolicyDocument: { Statement: Statement[] } }>;
  return policies.flatMap((policy) => policy.PolicyDocument.Statement);
}

/** The statements that grant something; the rest are explicit denies of what a function does not use. */
const allowedOf = (roleId: string, from: Template = template) => statementsOf(roleId, from).filter((s) => s.Effect === "Allow");

const actionsOf = (roleId: string, from: Template = template) => allowedOf(roleId, from).flatMap((s) => asList(s.Action));

function grants(roleId: string, action: string, target: string, partOfArn = false): boolean {
  return allowedOf(roleId).some(
    (s) => asList(s.Action).includes(action) && JSON.stringify(s.Resource).includes(partOfArn ? `${target}"` : `"${target}"`),
  );
}

describe("functions", () => {
  it("packages one CommonJS bundle per function", () => {
    for (const fn of Object.keys(FUNCTIONS)) {
      expect(packagedFiles).toContain(`${fn[0]!.toLowerCase()}${fn.slice(1)}.zip`);
    }
  });

  it.each(Object.entries(FUNCTIONS))("%s runs on nodejs22.x arm64 with its own role", (fn, spec) => {
    const props = lambda(fn as FunctionId);

    expect(props.Runtime).toBe("nodejs22.x");
    expect(props.Architectures).toEqual(["arm64"]);
    expect(props.Handler).toBe(spec.handler);
    expect(props.Role).toEqual({ "Fn::GetAtt": [spec.role, "Arn"] });
  });

  it("ships config/files in every zip and no source map", async () => {
    for (const fn of Object.keys(FUNCTIONS)) {
      const zip = join(workDir, "default", `${fn[0]!.toLowerCase()}${fn.slice(1)}.zip`);
      const { stdout } = await run("unzip", ["-Z1", zip]);
      const entries = stdout.trim().split("\n");

      expect(entries, fn).toContain("config/files/example-ca.pem");
      expect(entries.filter((entry) => entry.endsWith(".map")), fn).toEqual([]);
    }
  });

  it("uses no CloudFormation condition or stack parameter: optional parts, the lease table too, are resolved at package time", () => {
    for (const from of [template, optional, external, global]) {
      expect(from.Conditions ?? {}).toEqual({});
      expect(from.Parameters ?? {}).toEqual({});
      expect(Object.entries(from.Resources).filter(([, r]) => r.Condition !== undefined).map(([id]) => id)).toEqual([]);
    }
  });

  it("defines no other function and no shared execution role", () => {
    expect(ofType("AWS::Lambda::Function").map(([id]) => id).sort()).toEqual(
      Object.keys(FUNCTIONS).map((fn) => `${fn}LambdaFunction`).sort(),
    );
    expect(template.Resources.IamRoleLambdaExecution).toBeUndefined();
  });

  it("gives every function the environment of the app contract as plain values", () => {
    for (const fn of Object.keys(FUNCTIONS) as FunctionId[]) {
      const variables = (lambda(fn).Environment as { Variables: Json }).Variables;
      expect(typeof variables.PROVISIONER_CONFIG_YAML).toBe("string");
      expect(variables.LEASE_TABLE).toBe("choria-provisioner-test-lease");
      expect(variables.ADMISSION_TABLE).toBe("choria-provisioner-test-admission");
      expect(variables.HOST_WORK_QUEUE_URL).toEqual({ Ref: "HostWorkQueue" });
      expect(variables.HOST_WORK_DLQ_URL).toEqual({ Ref: "HostWorkDeadLetterQueue" });
      expect(variables.LIFECYCLE_QUEUE_URL).toEqual({ Ref: "LifecycleQueue" });
      expect(variables.LIFECYCLE_DLQ_URL).toEqual({ Ref: "LifecycleDeadLetterQueue" });
      expect(variables.POWERTOOLS_METRICS_NAMESPACE).toBe("ChoriaProvisioner");
      expect(variables.POWERTOOLS_SERVICE_NAME).toBe("choria-provisioner");
      // The default deployment_id: one stack per stage, Region and account, never the Region alone.
      expect(variables.STACK_DEPLOYMENT_ID).toEqual({ "Fn::Join": ["/", ["test", { Ref: "AWS::Region" }, { Ref: "AWS::AccountId" }]] });
    }
  });

  it("names tables and queues as the local runs and the operator CLI expect for a stage", () => {
    const names = stageResourceNames("test");
    const variables = (lambda("Status").Environment as { Variables: Json }).Variables;
    const queueName = (id: string) => resource(id).Properties.QueueName;

    expect([variables.LEASE_TABLE, variables.ADMISSION_TABLE]).toEqual([names.leaseTable, names.admissionTable]);
    expect(["HostWorkQueue", "HostWorkDeadLetterQueue", "LifecycleQueue", "LifecycleDeadLetterQueue"].map(queueName)).toEqual([
      names.hostWorkQueue,
      names.hostWorkDlq,
      names.lifecycleQueue,
      names.lifecycleDlq,
    ]);
  });

  it("delivers the configuration file unchanged, secrets as references", async () => {
    const file = await readFile(join(ROOT, "config/provisioner.example.yaml"), "utf8");
    const variables = (lambda("Provision").Environment as { Variables: Json }).Variables;

    expect(variables.PROVISIONER_CONFIG_YAML).toBe(file);
    expect(file).toMatch(/^token: ssm:\//m);
  });

  it("sizes timeouts for the work: discovery admits through most of the minute, a keeper run and a tick end well within it, provision a whole batch", () => {
    // Discovery admits until about 2 s before its deadline; the hosts it has not reached wait for the
    // next run, an interval (at least a minute) after this one started. A 30 s timeout left a
    // 5,000-node fleet idle for half of every minute in bench:peer; a run reaching the next one would
    // overlap it.
    expect(lambda("Discover").Timeout).toBeGreaterThanOrEqual(50);
    expect(lambda("Discover").Timeout).toBeLessThan(60);
    // One lease round and one SendMessageBatch: a run ends before the next minute's.
    expect(lambda("LeaseKeeper").Timeout).toBeLessThan(60);
    // A tick takes events until a second before the next one (renew_interval, 10 s by default) and
    // stops 2 s before its deadline; a queued event's admission fits the rest.
    expect(lambda("Lifecycle").Timeout).toBeGreaterThan(10 + 2);
    expect(lambda("Lifecycle").Timeout).toBeLessThan(60);
    expect(lambda("Provision").Timeout).toBeGreaterThanOrEqual(300);
  });

  it("reserves concurrency for the lease keeper and the ticks (the lifecycle function) only", () => {
    expect(lambda("LeaseKeeper").ReservedConcurrentExecutions).toBeGreaterThanOrEqual(1);
    // Two, so a tick can start while the last one ends.
    expect(lambda("Lifecycle").ReservedConcurrentExecutions).toBeGreaterThanOrEqual(2);
    expect(lambda("Provision").ReservedConcurrentExecutions).toBeUndefined();
  });

  it("does not retry scheduled functions asynchronously (the next scheduled run is the retry)", () => {
    for (const fn of ["Discover", "LeaseKeeper"]) {
      expect(resource(`${fn}LambdaEvConf`).Properties.MaximumRetryAttempts).toBe(0);
    }
  });
});

describe("configuration checked at package time", () => {
  const packageWith = async (yaml: string, params: Record<string, string> = {}) => {
    const file = join(workDir, `config-${Object.keys(params).length}-${yaml.length}.yaml`);
    await writeFile(file, yaml);
    return packageService(join(workDir, "rejected"), { provisionerConfig: file, ...params }).then(
      () => "packaged",
      (error: { stderr?: string; stdout?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
    );
  };
  const base = (extra: string) => `site: lon\nhelper_function: helper\nbroker_urls: [nats://b.example.net:4222]\n${extra}`;

  it("fails sls package naming an invalid key", async () => {
    const output = await packageWith(base("interval: 10s\n"));

    expect(output).toContain("cannot be deployed");
    expect(output).toMatch(/interval: must be at least 1m/);
  }, 120_000);

  it("fails sls package on a literal secret, without printing it", async () => {
    const output = await packageWith(base("interval: 1m\ntoken: s3cret-value\n"));

    expect(output).toMatch(/token: is a literal secret/);
    expect(output).not.toContain("s3cret-value");
  }, 120_000);
});

describe("schedules", () => {
  const ruleFor = (fn: FunctionId) => {
    const rules = ofType("AWS::Events::Rule").filter(([, r]) =>
      JSON.stringify(r.Properties.Targets).includes(`"${fn}LambdaFunction"`),
    );
    expect(rules).toHaveLength(1);
    return rules[0]![1].Properties;
  };

  it("runs discover every interval of the configuration (5m in the example)", () => {
    expect(ruleFor("Discover").ScheduleExpression).toBe("rate(5 minutes)");
  });

  it("runs the lease keeper every minute; the lifecycle function has no schedule (its ticks are the keeper's delayed messages)", () => {
    expect(ruleFor("LeaseKeeper").ScheduleExpression).toBe("rate(1 minute)");
    const lifecycleRules = ofType("AWS::Events::Rule").filter(([, r]) => JSON.stringify(r.Properties.Targets).includes('"LifecycleLambdaFunction"'));
    expect(lifecycleRules).toEqual([]);
  });

  it("lets EventBridge invoke each scheduled function", () => {
    const permissions = ofType("AWS::Lambda::Permission").map(([, p]) => p.Properties);
    for (const fn of ["Discover", "LeaseKeeper"]) {
      expect(
        permissions.some(
          (p) => p.Principal === "events.amazonaws.com" && JSON.stringify(p.FunctionName).includes(`${fn}LambdaFunction`),
        ),
      ).toBe(true);
    }
  });
});

describe("queues and event sources", () => {
  const mapping = (fn: FunctionId) => {
    const found = ofType("AWS::Lambda::EventSourceMapping").filter(([, m]) =>
      JSON.stringify(m.Properties.FunctionName).includes(`"${fn}LambdaFunction"`),
    );
    expect(found).toHaveLength(1);
    return found[0]![1].Properties;
  };

  it.each([
    ["Provision", "HostWorkQueue", "HostWorkDeadLetterQueue"],
    ["Lifecycle", "LifecycleQueue", "LifecycleDeadLetterQueue"],
  ] as const)("%s consumes %s with partial batch failures and a concurrency cap", (fn, queue, dlq) => {
    const source = mapping(fn);
    const queueProps = resource(queue).Properties;
    const functionTimeout = lambda(fn).Timeout as number;

    expect(source.EventSourceArn).toEqual({ "Fn::GetAtt": [queue, "Arn"] });
    expect(source.FunctionResponseTypes).toEqual(["ReportBatchItemFailures"]);
    expect((source.ScalingConfig as { MaximumConcurrency: number }).MaximumConcurrency).toBeGreaterThanOrEqual(2);
    expect(source.BatchSize).toBeGreaterThanOrEqual(1);
    expect(queueProps.VisibilityTimeout as number).toBeGreaterThanOrEqual(6 * functionTimeout);
    const redrive = queueProps.RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number };
    expect(redrive.deadLetterTargetArn).toEqual({ "Fn::GetAtt": [dlq, "Arn"] });
    expect(redrive.maxReceiveCount).toBeGreaterThanOrEqual(5);
  });

  it("batches host work for a second; hands a tick over the moment it is due, to no more invocations than are reserved", () => {
    expect(mapping("Provision").MaximumBatchingWindowInSeconds).toBeGreaterThanOrEqual(1);
    // A tick held back to fill a batch would run late; a missing window is none.
    expect(mapping("Lifecycle").MaximumBatchingWindowInSeconds ?? 0).toBe(0);
    const cap = (mapping("Lifecycle").ScalingConfig as { MaximumConcurrency: number }).MaximumConcurrency;
    expect(cap).toBeLessThanOrEqual(lambda("Lifecycle").ReservedConcurrentExecutions as number);
  });

  it("encrypts every queue and keeps dead letters for 14 days", () => {
    for (const [, queue] of ofType("AWS::SQS::Queue")) expect(queue.Properties.SqsManagedSseEnabled).toBe(true);
    expect(resource("HostWorkDeadLetterQueue").Properties.MessageRetentionPeriod).toBe(1_209_600);
    expect(resource("LifecycleDeadLetterQueue").Properties.MessageRetentionPeriod).toBe(1_209_600);
    expect(ofType("AWS::SQS::Queue")).toHaveLength(4);
  });
});

describe("tables", () => {
  it("keys the lease table by site, on demand, with point-in-time recovery and SSE", () => {
    const table = resource("LeaseTable").Properties;

    expect(table.KeySchema).toEqual([{ AttributeName: "site", KeyType: "HASH" }]);
    expect(table.BillingMode).toBe("PAY_PER_REQUEST");
    expect(table.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(table.SSESpecification).toEqual({ SSEEnabled: true });
  });

  it("keys the admission table by site + identity with TTL on ttl, and indexes the issuance ledger by day", () => {
    const table = resource("AdmissionTable").Properties;

    expect(table.KeySchema).toEqual([
      { AttributeName: "site", KeyType: "HASH" },
      { AttributeName: "identity", KeyType: "RANGE" },
    ]);
    expect(table.TimeToLiveSpecification).toEqual({ AttributeName: "ttl", Enabled: true });
    expect(table.BillingMode).toBe("PAY_PER_REQUEST");
    expect(table.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    // The issuance ledger's index by day, under the names lib/dynamodb/issuance-ledger.ts queries it by.
    expect(table.GlobalSecondaryIndexes).toEqual([
      {
        IndexName: "ledger-by-day",
        KeySchema: [
          { AttributeName: "ledgerDay", KeyType: "HASH" },
          { AttributeName: "issuedAt", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "ALL" },
      },
    ]);
    expect(table.SSESpecification).toEqual({ SSEEnabled: true });
  });

  it("keeps both tables when the stack is deleted (the lease term must never go back)", () => {
    expect((resource("LeaseTable") as unknown as Json).DeletionPolicy).toBe("Retain");
    expect((resource("AdmissionTable") as unknown as Json).DeletionPolicy).toBe("Retain");
  });
});

describe("the site's lease table", () => {
  const leaseStatements = (from: Template, role: string) =>
    statementsOf(role, from).filter((s) => asList(s.Action).some((action) => ["dynamodb:GetItem", "dynamodb:UpdateItem"].includes(action)) && !/admission/.test(JSON.stringify(s.Resource)));
  const tables = (from: Template) =>
    Object.entries(from.Resources)
      .filter(([, r]) => r.Type.startsWith("AWS::DynamoDB::"))
      .map(([id, r]) => `${id}: ${r.Type}`)
      .sort();

  it("is created by the stack in its own Region by default, as the plain table existing stacks hold", () => {
    expect(tables(template)).toEqual(["AdmissionTable: AWS::DynamoDB::Table", "LeaseTable: AWS::DynamoDB::Table"]);
    expect(resource("LeaseTable").Properties.TableName).toBe("choria-provisioner-test-lease");
    for (const role of LEASE_ROLES) {
      for (const statement of leaseStatements(template, role)) expect(statement.Resource, role).toEqual({ "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/choria-provisioner-test-lease" });
    }
  });

  it("with leaseTable=<ARN>: no lease table of its own, every lease statement and the app on that ARN", () => {
    expect(tables(external)).toEqual([]);
    expect(external.Resources.LeaseTable).toBeUndefined();
    expect(external.Resources.LeaseGlobalTable).toBeUndefined();
    // Nothing else points at a lease table of this stack (a Ref or GetAtt would fail the deploy).
    expect(JSON.stringify(external)).not.toMatch(/"LeaseTable"|"LeaseGlobalTable"|choria-provisioner-test-lease\b/);
    for (const role of LEASE_ROLES) {
      const statements = leaseStatements(external, role);
      expect(statements.length, role).toBeGreaterThan(0);
      for (const statement of statements) expect(statement.Resource, role).toBe(EXTERNAL_LEASE_TABLE);
    }
    for (const fn of Object.keys(FUNCTIONS)) {
      const variables = (resource(`${fn}LambdaFunction`, external).Properties.Environment as { Variables: Json }).Variables;
      expect(variables.LEASE_TABLE, fn).toBe(EXTERNAL_LEASE_TABLE);
    }
  });

  it("with admissionTable=<ARN>: no registry of its own; every function and every admission statement on the site's table", () => {
    expect(external.Resources.AdmissionTable).toBeUndefined();
    expect(JSON.stringify(external)).not.toMatch(/"AdmissionTable"|choria-provisioner-test-admission\b/);
    for (const fn of Object.keys(FUNCTIONS)) {
      const variables = (resource(`${fn}LambdaFunction`, external).Properties.Environment as { Variables: Json }).Variables;
      expect(variables.ADMISSION_TABLE, fn).toBe(EXTERNAL_ADMISSION_TABLE);
    }
    const onRegistry = (role: string) => statementsOf(role, external).filter((s) => JSON.stringify(s.Resource).includes("admission"));
    for (const role of ["DiscoverRole", "LeaseKeeperRole", "LifecycleRole", "ProvisionRole", "StatusRole", "ReprovisionRole", "RenewRole"]) {
      expect(onRegistry(role).map((s) => s.Resource), role).toEqual([EXTERNAL_ADMISSION_TABLE]);
    }
    expect(external.Outputs?.AdmissionTableName).toEqual({ Value: EXTERNAL_ADMISSION_TABLE });
  });

  it.each([
    ["a standby without admissionTable", { standby: "true", leaseTable: EXTERNAL_LEASE_TABLE }, /param admissionTable is empty: it would keep a registry of its own.*Set admissionTable to the name or ARN of the site's admission table/],
    ["a stack naming the site's lease but not its registry", { leaseTable: EXTERNAL_LEASE_TABLE }, /param leaseTable names the site's existing lease table but param admissionTable is empty/],
    ["a standby without leaseTable", { standby: "true", admissionTable: EXTERNAL_ADMISSION_TABLE }, /param leaseTable is empty: it would create a lease table of its own/],
  ])("refuses at package time %s, in one line saying what to pass", async (name, params, message) => {
    const failure = await packageService(join(workDir, name.replace(/\W+/g, "-")), params).then(
      () => undefined,
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
    );

    expect(failure).toMatch(message);
  }, 240_000);

  it("lets the ticks (the lifecycle function) keep the lease: read it and write it conditionally", () => {
    for (const from of [template, external]) {
      const actions = leaseStatements(from, "LifecycleRole").flatMap((s) => asList(s.Action));
      expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:UpdateItem"]));
    }
  });

  it("with leaseReplicaRegions: a multi-Region strongly consistent global table, replicas plus witness", () => {
    expect(tables(global)).toEqual(["AdmissionTable: AWS::DynamoDB::Table", "LeaseGlobalTable: AWS::DynamoDB::GlobalTable"]);
    const table = resource("LeaseGlobalTable", global) as Resource & Json;
    const props = table.Properties;

    expect(props.MultiRegionConsistency).toBe("STRONG");
    expect((props.Replicas as Array<{ Region: string }>).map((replica) => replica.Region)).toEqual(["eu-west-1", "eu-west-2"]);
    expect(props.GlobalTableWitnesses).toEqual([{ Region: "eu-west-3" }]);
    expect(props.KeySchema).toEqual([{ AttributeName: "site", KeyType: "HASH" }]);
    expect(table.DeletionPolicy).toBe("Retain");
    expect(props.StreamSpecification).toBeUndefined();
    for (const role of LEASE_ROLES) {
      for (const statement of leaseStatements(global, role)) expect(statement.Resource, role).toEqual({ "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/choria-provisioner-test-lease" });
    }
  });

  it("refuses at package time a lease on a standard (eventually consistent) global table", async () => {
    const failure = await packageService(join(workDir, "eventual"), { leaseReplicaRegions: "eu-west-2,eu-west-3", leaseMultiRegionConsistency: "EVENTUAL" }).then(
      () => undefined,
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
    );

    expect(failure).toMatch(/leaseMultiRegionConsistency=EVENTUAL: the lease table cannot be a multi-Region eventually consistent/);
  }, 240_000);
});

describe("IAM", () => {
  const roles = Object.values(FUNCTIONS).map((f) => f.role);

  it("uses no wildcard action anywhere, with or without the optional params", () => {
    for (const from of [template, optional]) {
      for (const role of roles) {
        for (const action of actionsOf(role, from)) {
          expect(action, `${role}: ${action}`).not.toMatch(/\*/);
        }
      }
    }
  });

  it("names specific resources for every data action, with or without the optional params", () => {
    for (const [from, role] of [template, optional].flatMap((t) => roles.map((r) => [t, r] as const))) {
      for (const statement of allowedOf(role, from)) {
        const service = asList(statement.Action)[0]!.split(":")[0]!;
        if (!DATA_SERVICES.includes(service)) continue;
        for (const target of asList(statement.Resource)) {
          expect(target, `${role}: ${JSON.stringify(statement.Action)}`).not.toBe("*");
          if (typeof target === "string") expect(target).toMatch(/^arn:/);
        }
      }
    }
  });

  it("adds KMS decrypt on the given key only when configured", () => {
    const kms = (from: Template) => allowedOf("ProvisionRole", from).filter((s) => asList(s.Action).includes("kms:Decrypt"));
    expect(kms(template)).toHaveLength(0);
    expect(kms(optional).map((s) => s.Resource)).toEqual([OPTIONAL_PARAMS.secretsKmsKeyArn]);
  });

  it("puts exactly the broker functions in the VPC when one is given, with the network-interface actions, and creates no endpoint", () => {
    const eni = (role: string, from: Template) => actionsOf(role, from).filter((a) => a.startsWith("ec2:"));
    for (const [fn, spec] of Object.entries(FUNCTIONS)) {
      const name = `${fn[0]!.toLowerCase()}${fn.slice(1)}`;
      const broker = BROKER_FUNCTIONS.includes(name);
      expect(lambda(fn as FunctionId).VpcConfig, fn).toBeUndefined();
      expect(eni(spec.role, template), fn).toHaveLength(0);
      expect(resource(`${fn}LambdaFunction`, optional).Properties.VpcConfig, fn).toEqual(
        broker ? { SecurityGroupIds: ["sg-0c"], SubnetIds: ["subnet-0a", "subnet-0b"] } : undefined,
      );
      if (broker) expect(eni(spec.role, optional), fn).toContain("ec2:CreateNetworkInterface");
      else expect(eni(spec.role, optional), fn).toHaveLength(0);
    }
    // The VPC's endpoints (the DynamoDB gateway endpoint, SQS and the secret stores) or NAT are the
    // site's network, shared by its deployments and other workloads: created beside the stack, not in it.
    expect(ofType("AWS::EC2::VPCEndpoint", optional)).toHaveLength(0);
  });

  it("lets each function write only its own log group", () => {
    for (const [fn, spec] of Object.entries(FUNCTIONS)) {
      const logs = statementsOf(spec.role).filter((s) => asList(s.Action).some((a) => a.startsWith("logs:")));
      const name = `${fn[0]!.toLowerCase()}${fn.slice(1)}`;
      expect(logs).toHaveLength(1);
      expect(JSON.stringify(logs[0]!.Resource)).toContain(`log-group:/aws/lambda/choria-provisioner-test-${name}:*`);
    }
  });

  it("gives the SQS consumers exactly what their event source mapping needs", () => {
    for (const action of ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"]) {
      expect(grants("ProvisionRole", action, "HostWorkQueue")).toBe(true);
      expect(grants("LifecycleRole", action, "LifecycleQueue")).toBe(true);
    }
    expect(grants("ProvisionRole", "sqs:SendMessage", "HostWorkDeadLetterQueue")).toBe(true);
  });

  it("lets only the admitting functions enqueue host work", () => {
    // Renew and provision read the gate, which may win a term; the won term's announcement discovers and admits.
    const admitting = ["DiscoverRole", "LeaseKeeperRole", "LifecycleRole", "ProvisionRole", "ReprovisionRole", "RenewRole"];
    for (const role of roles) {
      expect(grants(role, "sqs:SendMessage", "HostWorkQueue"), role).toBe(admitting.includes(role));
      expect(grants(role, "dynamodb:PutItem", OWN_ADMISSION, true), role).toBe(admitting.includes(role));
    }
    // ...and a discovery that left names out queues its continuation on the lifecycle queue.
    for (const role of admitting) expect(grants(role, "sqs:SendMessage", "LifecycleQueue"), role).toBe(true);
    // A discovery reads the registry's known names (Query) and paces itself on the queue's depth.
    for (const role of admitting) {
      expect(grants(role, "dynamodb:Query", OWN_ADMISSION, true), role).toBe(true);
      expect(grants(role, "sqs:GetQueueAttributes", "HostWorkQueue"), role).toBe(true);
    }
    // The keeper arms its ticks on its own lifecycle queue.
    expect(grants("LeaseKeeperRole", "sqs:SendMessage", "LifecycleQueue")).toBe(true);
  });

  it("lets every lease user conditionally write the lease and status only read", () => {
    for (const role of ["DiscoverRole", "LeaseKeeperRole", "LifecycleRole", "ProvisionRole", "ReprovisionRole", "ReleaseRole", "RenewRole"]) {
      expect(grants(role, "dynamodb:UpdateItem", "table/choria-provisioner-test-lease", true), role).toBe(true);
      expect(grants(role, "dynamodb:GetItem", "table/choria-provisioner-test-lease", true), role).toBe(true);
    }
    // GetItem on the lease and on renewal's state item, Query on the registry: reads only.
    expect([...new Set(actionsOf("StatusRole").filter((a) => a.startsWith("dynamodb:")))].sort()).toEqual(["dynamodb:GetItem", "dynamodb:Query"]);
  });

  it("lets each function read exactly the secrets it resolves, and denies the others any", () => {
    const readable = (role: string) =>
      allowedOf(role)
        .filter((s) => asList(s.Action).some((a) => a.startsWith("ssm:") || a.startsWith("secretsmanager:")))
        .flatMap((s) => asList(s.Resource).map((r) => JSON.stringify(r)));
    const broker = ":secret:choria/provisioner/broker-??????";

    expect(readable("ProvisionRole").join()).toContain(":parameter/choria/provisioner/token");
    expect(readable("ProvisionRole").join()).toContain(broker);
    expect(readable("ProvisionRole").join()).toContain(":secret:choria/provisioner/signing-key-??????");
    expect(readable("ProvisionRole")).toHaveLength(3);
    for (const role of ["DiscoverRole", "LeaseKeeperRole", "LifecycleRole", "ReprovisionRole"]) {
      expect(readable(role), role).toHaveLength(1);
      expect(readable(role)[0], role).toContain(broker);
    }
    // Renew sends the provisioning token with reprovision, and connects like every broker function.
    expect(readable("RenewRole").join()).toContain(":parameter/choria/provisioner/token");
    expect(readable("RenewRole").join()).toContain(broker);
    expect(readable("RenewRole").join()).not.toContain("signing-key");
    for (const role of ["StatusRole", "ReleaseRole"]) {
      expect(readable(role), role).toEqual([]);
      const deny = statementsOf(role).find((s) => s.Effect === "Deny" && asList(s.Action).includes("secretsmanager:GetSecretValue"));
      expect(deny?.Resource, role).toBe("*");
    }
  });

  it("lets only provision invoke the configured helper function", () => {
    for (const role of roles) {
      const invoke = allowedOf(role).filter((s) => asList(s.Action).includes("lambda:InvokeFunction"));
      expect(invoke.length, role).toBe(role === "ProvisionRole" ? 1 : 0);
    }
    const [helper] = allowedOf("ProvisionRole").filter((s) => asList(s.Action).includes("lambda:InvokeFunction"));
    expect(JSON.stringify(helper!.Resource)).toContain(":function:choria-provisioner-helper");
  });

  it("knows the same functions as the configuration loader", () => {
    const resolver = require(join(ROOT, "config/deployment.cjs")) as { FUNCTIONS: string[] };

    expect(resolver.FUNCTIONS).toEqual([...FUNCTION_NAMES]);
    expect(Object.keys(FUNCTIONS).map((fn) => `${fn[0]!.toLowerCase()}${fn.slice(1)}`)).toEqual([...FUNCTION_NAMES]);
  });
});

describe("alarms", () => {
  const alarms = () => ofType("AWS::CloudWatch::Alarm").map(([id, a]) => ({ id, ...(a.Properties as { Namespace: string; MetricName: string; Dimensions: unknown }) }));
  const alarm = (id: string) => resource(id).Properties;

  it("alarms on any message in either dead-letter queue", () => {
    for (const [id, dlq] of [
      ["HostWorkDeadLetterAlarm", "HostWorkDeadLetterQueue"],
      ["LifecycleDeadLetterAlarm", "LifecycleDeadLetterQueue"],
    ]) {
      const props = alarm(id!);
      expect(props.Namespace).toBe("AWS/SQS");
      expect(props.MetricName).toBe("ApproximateNumberOfMessagesVisible");
      expect(props.Dimensions).toEqual([{ Name: "QueueName", Value: { "Fn::GetAtt": [dlq, "QueueName"] } }]);
      expect(props.Threshold).toBe(0);
      expect(props.ComparisonOperator).toBe("GreaterThanThreshold");
    }
  });

  it("alarms when the site stays paused, and can be switched off for standbys", () => {
    const props = alarm("PausedTooLongAlarm");
    const standby = resource("PausedTooLongAlarm", optional);

    expect(props.Namespace).toBe("ChoriaProvisioner");
    expect(props.MetricName).toBe(METRIC.paused);
    expect(props.Dimensions).toContainEqual({ Name: "site", Value: "lon" });
    expect(props.Statistic).toBe("Minimum");
    expect(props.Threshold).toBe(1);
    expect(props.ComparisonOperator).toBe("GreaterThanOrEqualToThreshold");
    expect(props.EvaluationPeriods as number).toBeGreaterThanOrEqual(2);
    expect(props.ActionsEnabled).toBe(true);
    expect(standby.Properties.ActionsEnabled).toBe(false);
  });

  it.each([
    ["LeaseSettingsMismatchAlarm", EXTRA_METRIC.leaseSettingsMismatch],
    ["LeaseUnknownPeerAlarm", EXTRA_METRIC.leaseUnknownPeers],
    ["DiscoveryNamesDroppedAlarm", EXTRA_METRIC.discoveryNamesDropped],
  ])("%s fires on the first %s counted", (id, metric) => {
    const props = alarm(id);

    expect(props.MetricName).toBe(metric);
    expect(props.Dimensions).toContainEqual({ Name: "site", Value: "lon" });
    expect(props.Statistic).toBe("Sum");
    expect(props.Threshold).toBe(1);
    expect(props.ComparisonOperator).toBe("GreaterThanOrEqualToThreshold");
  });

  it("alarms when no deployment of the site holds the lease, on every stack, and not while nothing reports", () => {
    const props = alarm("LeaseUnheldAlarm");
    const standby = resource("LeaseUnheldAlarm", optional);

    expect(props.Namespace).toBe("ChoriaProvisioner");
    expect(props.MetricName).toBe(EXTRA_METRIC.leaseUnheld);
    expect(props.Dimensions).toEqual([
      { Name: "site", Value: "lon" },
      { Name: "service", Value: "choria-provisioner" },
    ]);
    expect(props.Statistic).toBe("Maximum");
    expect(props.Period).toBe(60);
    expect(props.EvaluationPeriods).toBe(1);
    expect(props.Threshold).toBe(1);
    expect(props.ComparisonOperator).toBe("GreaterThanOrEqualToThreshold");
    // Nobody reporting is not "somebody holds it": INSUFFICIENT_DATA, never OK.
    expect(props.TreatMissingData).toBe("missing");
    expect(props.AlarmName).toBe("choria-provisioner-test-no-lease-holder");
    expect(props.AlarmDescription).toContain('"No deployment holds the lease" in docs/operations.md');
    expect(standby.Properties.ActionsEnabled).not.toBe(false);
  });

  it("alarms on the provision error rate from the provisioner's own metrics", () => {
    const metrics = alarm("ProvisionErrorRateAlarm").Metrics as Array<{ MetricStat?: { Metric: { MetricName: string } } }>;
    const names = metrics.flatMap((m) => (m.MetricStat ? [m.MetricStat.Metric.MetricName] : []));

    expect(names.sort()).toEqual([METRIC.provisionErrors, METRIC.provisioned].sort());
  });

  it("alarms when every host fails: errors and not one host provisioned, twice in a row", () => {
    const props = alarm("AllHostsFailingAlarm");
    const metrics = props.Metrics as Array<{ Id: string; Expression?: string; ReturnData: boolean; MetricStat?: { Metric: { MetricName: string }; Period: number; Stat: string } }>;
    const stats = metrics.flatMap((m) => (m.MetricStat ? [m.MetricStat] : []));
    const [expression] = metrics.filter((m) => m.ReturnData);

    expect(stats.map((stat) => stat.Metric.MetricName).sort()).toEqual([METRIC.provisionErrors, METRIC.provisioned].sort());
    expect(stats.every((stat) => stat.Period === 300 && stat.Stat === "Sum")).toBe(true);
    expect(expression?.Expression).toBe("IF(FILL(failed, 0) >= 5 AND FILL(provisioned, 0) == 0, 1, 0)");
    expect(props.EvaluationPeriods).toBe(2);
    expect(props.DatapointsToAlarm).toBe(2);
    expect(props.AlarmDescription).toContain("docs/operations.md");
  });

  it("alarms on Lambda errors of every function", () => {
    const lambdaAlarms = alarms().filter((a) => a.Namespace === "AWS/Lambda" && a.MetricName === "Errors");
    const watched = lambdaAlarms.map((a) => (a.Dimensions as Array<{ Value: { Ref: string } }>)[0]!.Value.Ref).sort();

    expect(watched).toEqual(Object.keys(FUNCTIONS).map((fn) => `${fn}LambdaFunction`).sort());
  });

  it("notifies the alarm topic only when one is configured", () => {
    for (const [id] of ofType("AWS::CloudWatch::Alarm")) {
      expect(resource(id).Properties.AlarmActions, id).toEqual([]);
      expect(resource(id, optional).Properties.AlarmActions, id).toEqual([OPTIONAL_PARAMS.alarmTopicArn]);
      expect(resource(id, optional).Properties.OKActions, id).toEqual([OPTIONAL_PARAMS.alarmTopicArn]);
    }
  });
});

describe("dashboard", () => {
  const body = () => JSON.parse(resource("Dashboard").Properties.DashboardBody as string) as { widgets: Array<{ properties: { title: string; metrics: unknown[] } }> };
  const panel = (title: string) => {
    const found = body().widgets.find((w) => w.properties.title === title);
    expect(found, title).toBeDefined();
    return JSON.stringify(found!.properties.metrics);
  };

  it("has the Go provisioner dashboard's panels on the site's metrics", () => {
    expect(panel("Discovery")).toContain(METRIC.discovered);
    expect(panel("Discovery")).toContain(METRIC.eventDiscovered);
    expect(panel("Discovery")).toContain(METRIC.discoverCycles);
    expect(panel("Provisioned")).toContain(METRIC.provisioned);
    expect(panel("Provisioned")).toContain(METRIC.provisionErrors);
    expect(panel("RPC time by rpc (average, s)")).toContain(METRIC.rpcTime);
    expect(panel("RPC errors by rpc")).toContain(METRIC.rpcErrors);
    expect(panel("Helper")).toContain(METRIC.helperTime);
    expect(panel("Helper")).toContain(METRIC.helperErrors);
    expect(panel("Busy workers / waiting nodes")).toContain(METRIC.busyWorkers);
    expect(panel("Busy workers / waiting nodes")).toContain(METRIC.waitingNodes);
    expect(panel("Busy workers / waiting nodes")).toContain(METRIC.workQueueEntries);
    expect(panel("Paused and lease term")).toContain(METRIC.paused);
    expect(panel("Paused and lease term")).toContain("choria_provisioner_lease_term");
    expect(panel("Queue depths")).toContain("choria-provisioner-test-host-work-dlq");
    expect(panel("Errors")).toContain(EXTRA_METRIC.discoveryNamesDropped);
    expect(JSON.stringify(body())).toContain('"site","lon"');
  });

  it("shows busy workers as the total across invocations: busy seconds summed per period over the period", () => {
    const metricsOf = (title: string) => body().widgets.find((w) => w.properties.title === title)!.properties.metrics as unknown[][];
    for (const title of ["Busy workers (average, all invocations)", "Busy workers / waiting nodes"]) {
      const metrics = metricsOf(title);
      const seconds = metrics.find((m) => m.includes(EXTRA_METRIC.busyWorkerSeconds));
      expect(seconds, title).toBeDefined();
      const options = seconds!.at(-1) as { id: string; stat: string; visible: boolean };
      expect(seconds!.slice(0, -1), title).toEqual(["ChoriaProvisioner", EXTRA_METRIC.busyWorkerSeconds, "service", "choria-provisioner", "site", "lon"]);
      expect(options.stat, title).toBe("Sum");
      expect(options.visible, title).toBe(false);
      const shown = metrics.map((m) => m[0] as { expression?: string; label?: string }).find((m) => m.expression !== undefined);
      expect(shown?.expression, title).toBe(`${options.id} / PERIOD(${options.id})`);
      expect(shown?.label, title).toContain("busy workers");
    }
    // The per-invocation gauge stays, said for what it is, never as "Maximum" of the site's busy workers.
    const gauge = metricsOf("Busy workers / waiting nodes").find((m) => m.includes(METRIC.busyWorkers))!;
    expect((gauge.at(-1) as { label: string }).label).toBe("busy workers (busiest invocation)");
    expect(JSON.stringify(metricsOf("Busy workers (average, all invocations)"))).not.toContain(`"${METRIC.busyWorkers}"`);
  });

  it("covers every Go metric somewhere", () => {
    const text = JSON.stringify(body());
    for (const name of Object.values(METRIC)) expect(text, name).toContain(name);
  });
});

describe("alarms on renewal keeping up, on the site's one registry and on the provisioning JWTs nodes present", () => {
  it.each([
    ["RenewalCapacityAlarm", EXTRA_METRIC.renewalCapacityShortfall, 300, "renewal-capacity-shortfall"],
    ["RenewalHostsAtRiskAlarm", EXTRA_METRIC.renewalHostsAtRisk, 60, "renewal-hosts-at-risk"],
    ["RegistryMismatchAlarm", EXTRA_METRIC.registryMismatch, 300, "registry-mismatch"],
    // Gauged by each discovery: an hour spans any discovery interval, so the alarm does not flap between them.
    ["ProvisioningJwtsExpiringAlarm", EXTRA_METRIC.provisioningJwtsExpiring, 3600, "provisioning-jwts-expiring"],
    ["ProvisioningJwtsExpiredAlarm", EXTRA_METRIC.provisioningJwtsExpired, 3600, "provisioning-jwts-expired"],
  ])("%s fires on any %s above 0 (the worst sample of a %i s period), and is not breached while nothing reports", (id, metric, period, name) => {
    const props = resource(id).Properties;

    expect(props.Namespace).toBe("ChoriaProvisioner");
    expect(props.MetricName).toBe(metric);
    expect(props.Dimensions).toEqual([
      { Name: "site", Value: "lon" },
      { Name: "service", Value: "choria-provisioner" },
    ]);
    expect(props.Statistic).toBe("Maximum");
    expect(props.Period).toBe(period);
    expect(props.EvaluationPeriods).toBe(1);
    expect(props.Threshold).toBe(0);
    expect(props.ComparisonOperator).toBe("GreaterThanThreshold");
    expect(props.TreatMissingData).toBe("notBreaching");
    expect(props.AlarmName).toBe(`choria-provisioner-test-${name}`);
    expect(props.AlarmDescription).toContain(`"${name}" in docs/operations.md`);
    expect(resource(id, optional).Properties.AlarmActions).toEqual([OPTIONAL_PARAMS.alarmTopicArn]);
  });
});

describe("the alarm on quarantined hosts", () => {
  it("fires on any quarantined host in a minute and keeps its state between discoveries (an interval may be longer than its period)", () => {
    const props = resource("HostsQuarantinedAlarm").Properties;

    expect(props.Namespace).toBe("ChoriaProvisioner");
    expect(props.MetricName).toBe(EXTRA_METRIC.hostsQuarantined);
    expect(props.Dimensions).toEqual([
      { Name: "site", Value: "lon" },
      { Name: "service", Value: "choria-provisioner" },
    ]);
    expect(props.Statistic).toBe("Maximum");
    expect(props.Period).toBe(60);
    expect(props.Threshold).toBe(0);
    expect(props.ComparisonOperator).toBe("GreaterThanThreshold");
    expect(props.TreatMissingData).toBe("ignore");
    expect(props.AlarmName).toBe("choria-provisioner-test-hosts-quarantined");
    expect(props.AlarmDescription).toContain('"hosts-quarantined" in docs/operations.md');
    expect(resource("HostsQuarantinedAlarm", optional).Properties.OKActions).toEqual([OPTIONAL_PARAMS.alarmTopicArn]);
  });
});
