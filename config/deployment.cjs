/**
 * Package-time resolver for serverless.yml (`${file(./config/deployment.cjs):<key>}`).
 *
 * It checks the provisioner configuration file named by the `provisionerConfig` param with the
 * app's own validation (`scripts/check-config.ts`, lib/config/deploy-check.ts) and fails the package
 * on an invalid key or a literal secret, so `sls package` / `sls deploy` never ship a configuration
 * the functions would refuse. Then it hands the template what it needs, so nothing is configured twice:
 * - `configYaml`: the file's text, delivered unchanged as PROVISIONER_CONFIG_YAML (a plain string,
 *   so `sls invoke local` needs no AWS call to build the environment);
 * - `site`: the `site` metric dimension the alarms and the dashboard select;
 * - `discoverSchedule`: the discovery schedule, from `interval`;
 * - `secretsPolicy.<function>`: per function, read access to exactly the parameters and secrets that
 *   function resolves (lib/config/secrets.ts FUNCTION_SETTINGS), or an explicit deny of any;
 * - `helperInvokeStatement`, `alarmActions`, `helperLayer*`: the optional parts as plain values rather
 *   than CloudFormation conditions that would be constant at package time;
 * - `vpc.<function>`, `vpcPolicy.<function>`: with the `subnetIds` / `securityGroupIds` params, the VPC
 *   and the network-interface permissions of the functions that reach the broker (BROKER_FUNCTIONS);
 *   null and an explicit deny for every other function, and for all without the params;
 * - `dashboardBody`: the CloudWatch dashboard's JSON;
 * - the site's two tables (`lease*`, `admission*` keys), shared by every deployment of the site:
 *   each owned by this stack (one Region, or a multi-Region strongly consistent global table), or an
 *   existing one named by the `leaseTable` / `admissionTable` param; see `siteTables`.
 *   `siteTableResources` holds the tables this stack creates.
 *
 * CommonJS (.cjs) because osls loads resolver files with `require` and package.json says "module".
 */
/* global require, module, process, console */
/* eslint-disable @typescript-eslint/no-require-imports -- osls require()s resolver files */
"use strict";

const { execFileSync } = require("node:child_process");
const { existsSync, statSync } = require("node:fs");
const { readFile } = require("node:fs/promises");
const path = require("node:path");

/** The app's metric dimension value for an empty site (lib/aws/powertools-metrics.ts). */
const UNSET_SITE = "unset";
/** The metric namespace and service name the functions are given; lib/aws/settings.ts APP_DEFAULTS match (tested). */
const NAMESPACE = "ChoriaProvisioner";
/** Powertools adds a `service` dimension (POWERTOOLS_SERVICE_NAME) next to the app's `site`. */
const SERVICE_DIMENSION = "choria-provisioner";
const FUNCTIONS = ["discover", "leaseKeeper", "lifecycle", "provision", "status", "reprovision", "release", "renew"];
/**
 * The functions that connect to the broker (their handler composes `brokerFunction`, lib/aws/compose-broker-function.ts;
 * test/unit/deploy/vpc-functions.test.ts holds the two lists together): with the `subnetIds` / `securityGroupIds`
 * params only these run in the VPC, the others reach DynamoDB and SQS as any function outside a VPC does
 * (docs/deploy.md, "Running in a VPC").
 */
const BROKER_FUNCTIONS = ["discover", "leaseKeeper", "lifecycle", "provision", "reprovision", "renew"];
const SECRET_ACTIONS = ["ssm:GetParameter", "ssm:GetParameters", "secretsmanager:GetSecretValue"];
const ENI_ACTIONS = [
  "ec2:CreateNetworkInterface",
  "ec2:DescribeNetworkInterfaces",
  "ec2:DeleteNetworkInterface",
  "ec2:AssignPrivateIpAddresses",
  "ec2:UnassignPrivateIpAddresses",
];

const sub = (text) => ({ "Fn::Sub": text });
const regionalArn = (service, rest) => `arn:\${AWS::Partition}:${service}:\${AWS::Region}:\${AWS::AccountId}:${rest}`;
const policy = (name, statements) => ({ PolicyName: name, PolicyDocument: { Version: "2012-10-17", Statement: statements } });

function ssmParameterArn(name) {
  if (name.startsWith("arn:")) return name;
  const parameterPath = name.startsWith("/") ? name : `/${name}`;
  return sub(regionalArn("ssm", `parameter${parameterPath}`));
}

/** Secrets Manager appends six random characters to a secret's name in its ARN. */
function secretArn(nameOrArn) {
  if (nameOrArn.startsWith("arn:")) return nameOrArn;
  return sub(regionalArn("secretsmanager", `secret:${nameOrArn}-??????`));
}

/** The function and every version or alias of it (a qualified ARN may be configured). */
function helperFunctionArns(nameOrArn) {
  const base = nameOrArn.startsWith("arn:") ? nameOrArn : regionalArn("lambda", `function:${nameOrArn}`);
  const wrap = nameOrArn.startsWith("arn:") ? (text) => text : sub;
  return [wrap(base), wrap(`${base}:*`)];
}

const unique = (items) => [...new Map(items.map((item) => [JSON.stringify(item), item])).values()];

/**
 * The config-secrets policy of one function: reading exactly its references (and decrypting with the
 * customer key when given), or, for a function that resolves none, an explicit deny of reading any.
 */
function secretsPolicy(references, kmsKeyArn) {
  const ssm = unique(references.filter((r) => r.store === "ssm").map((r) => ssmParameterArn(r.name)));
  const secrets = unique(references.filter((r) => r.store === "secretsmanager").map((r) => secretArn(r.name)));
  const statements = [];
  if (ssm.length > 0) statements.push({ Effect: "Allow", Action: ["ssm:GetParameter", "ssm:GetParameters"], Resource: ssm });
  if (secrets.length > 0) statements.push({ Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: secrets });
  if (statements.length > 0 && kmsKeyArn) statements.push({ Effect: "Allow", Action: ["kms:Decrypt"], Resource: kmsKeyArn });
  if (statements.length === 0) statements.push({ Sid: "UsesNoConfigSecret", Effect: "Deny", Action: SECRET_ACTIONS, Resource: "*" });
  return policy("read-config-secrets", statements);
}

/**
 * Per function: its VPC (`vpc.<function>`, null: none) and its network-interface policy
 * (`vpcPolicy.<function>`). Only the functions that reach the broker run in the VPC when the params
 * name one; a function in a VPC reaches AWS services only through that VPC's endpoints or NAT, so
 * keeping the others out asks nothing of the VPC for them.
 */
function functionVpcs({ subnetIds, securityGroupIds }) {
  const inVpc = (fn) => subnetIds.length > 0 && BROKER_FUNCTIONS.includes(fn);
  return {
    vpc: Object.fromEntries(FUNCTIONS.map((fn) => [fn, inVpc(fn) ? { subnetIds, securityGroupIds } : null])),
    vpcPolicy: Object.fromEntries(
      FUNCTIONS.map((fn) => [
        fn,
        inVpc(fn)
          ? // Lambda manages the ENIs of a VPC function with these; EC2 gives them no resource ARNs.
            policy("vpc-network-interfaces", [{ Effect: "Allow", Action: ENI_ACTIONS, Resource: "*" }])
          : policy("vpc-network-interfaces", [{ Sid: "NotInAVpc", Effect: "Deny", Action: ENI_ACTIONS, Resource: "*" }]),
      ]),
    ),
  };
}

function splitList(text) {
  return String(text ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

/** Runs the app's own configuration check (TypeScript, through tsx) and returns its JSON result. */
function checkConfig(serviceDir, file, { allowLiteralSecrets, helperLayer }) {
  const args = ["--import", "tsx", path.join(serviceDir, "scripts/check-config.ts"), "--json"];
  if (allowLiteralSecrets) args.push("--allow-literal-secrets");
  if (helperLayer) args.push("--helper-layer");
  const output = execFileSync(process.execPath, [...args, file], { cwd: serviceDir, encoding: "utf8" });
  return JSON.parse(output);
}

/**
 * The dashboard mirrors the panels of the Go provisioner's Grafana dashboard (provisioned per hour,
 * busy workers, paused, discovery, events, RPC and helper times, errors) and adds what only exists
 * here: queue depths, DLQs, the lease term and the functions' own errors and throttles.
 */
function dashboardBody({ site, region, functionNames, queues }) {
  const metric = (name, stat, label, extra = {}) => [
    NAMESPACE,
    name,
    "service",
    SERVICE_DIMENSION,
    "site",
    site,
    { stat, label, ...extra },
  ];
  const byRpc = (name, stat) =>
    `SEARCH('{${NAMESPACE},rpc,service,site} MetricName="${name}" service="${SERVICE_DIMENSION}" site="${site}"', '${stat}', 60)`;
  const widget = (x, y, w, h, title, metrics, extra = {}) => ({
    type: "metric",
    x,
    y,
    width: w,
    height: h,
    properties: { title, region, view: "timeSeries", stacked: false, period: 60, metrics, ...extra },
  });
  const single = (x, y, w, h, title, metrics, extra = {}) =>
    widget(x, y, w, h, title, metrics, { view: "singleValue", ...extra });
  const queueMetric = (queueName, label) => [
    "AWS/SQS",
    "ApproximateNumberOfMessagesVisible",
    "QueueName",
    queueName,
    { stat: "Maximum", label },
  ];

  // The Go panel shows the workers busy across the daemon. Here each invocation has its own
  // busy_workers gauge, and a Maximum of those is only the busiest invocation; the seconds every
  // provision kept a worker busy add up across invocations, so their Sum over the period's length
  // is the site-wide number of busy workers, averaged over the period.
  const busyWorkers = (id, label) => [
    [{ expression: `${id}s / PERIOD(${id}s)`, id, label }],
    metric("choria_provisioner_busy_worker_seconds", "Sum", `${label} (busy seconds)`, { id: `${id}s`, visible: false }),
  ];

  const widgets = [
    single(0, 0, 8, 4, "Nodes provisioned / hour", [metric("choria_provisioner_provisioned", "Sum", "provisioned")], {
      period: 3600,
    }),
    single(8, 0, 4, 4, "Busy workers (average, all invocations)", busyWorkers("busy", "busy workers")),
    single(12, 0, 4, 4, "Paused (1 = paused)", [metric("choria_provisioner_paused", "Maximum", "paused")]),
    single(16, 0, 4, 4, "Lease term", [metric("choria_provisioner_lease_term", "Maximum", "term")]),
    single(20, 0, 4, 4, "Host-work DLQ", [queueMetric(queues.hostWorkDlq, "messages")]),

    widget(0, 4, 8, 6, "Discovery", [
      metric("choria_provisioner_discover_cycles", "Sum", "discovery runs"),
      metric("choria_provisioner_discovered", "Sum", "discovered", { yAxis: "right" }),
      metric("choria_provisioner_event_discovered", "Sum", "event discovered", { yAxis: "right" }),
      metric("choria_provisioner_lifecycle_events_received", "Sum", "startup events received", { yAxis: "right" }),
    ]),
    widget(8, 4, 8, 6, "Provisioned", [
      metric("choria_provisioner_provisioned", "Sum", "provisioned"),
      metric("choria_provisioner_provision_errors", "Sum", "provision errors"),
      metric("choria_provisioner_helper_shutdown_requests", "Sum", "helper shutdown requests"),
      metric("choria_provisioner_stale_work_discarded", "Sum", "stale work discarded"),
    ]),
    widget(16, 4, 8, 6, "Busy workers / waiting nodes", [
      ...busyWorkers("busy", "busy workers (average, all invocations)"),
      metric("choria_provisioner_busy_workers", "Maximum", "busy workers (busiest invocation)"),
      metric("choria_provisioner_waiting_nodes", "Maximum", "waiting nodes"),
      metric("choria_provisioner_work_queue_entries", "Maximum", "work queue entries"),
    ]),

    widget(0, 10, 12, 6, "RPC time by rpc (average, s)", [[{ expression: byRpc("choria_provisioner_rpc_time", "Average"), id: "rpctime", label: "" }]]),
    widget(12, 10, 12, 6, "RPC errors by rpc", [[{ expression: byRpc("choria_provisioner_rpc_errors", "Sum"), id: "rpcerrors", label: "" }]]),

    widget(0, 16, 8, 6, "Helper", [
      metric("choria_provisioner_helper_time", "Average", "helper time (s)"),
      metric("choria_provisioner_helper_errors", "Sum", "helper errors", { yAxis: "right" }),
    ]),
    widget(8, 16, 8, 6, "Errors", [
      metric("choria_provisioner_discovery_errors", "Sum", "discovery"),
      metric("choria_provisioner_provision_errors", "Sum", "provision"),
      metric("choria_provisioner_helper_errors", "Sum", "helper"),
      metric("choria_provisioner_lease_store_errors", "Sum", "lease store"),
      metric("choria_provisioner_lifecycle_events_dropped", "Sum", "lifecycle events dropped"),
      metric("choria_provisioner_lifecycle_events_dead_lettered", "Sum", "lifecycle events SQS refused (DLQ)"),
      metric("choria_provisioner_discovery_capped", "Sum", "discoveries stopped at their collection bound"),
      metric("choria_provisioner_discovery_names_dropped", "Sum", "discovered names left out (budget, cap)", { yAxis: "right" }),
    ]),
    widget(16, 16, 8, 6, "Paused and lease term", [
      metric("choria_provisioner_paused", "Maximum", "paused"),
      metric("choria_provisioner_lease_term", "Maximum", "lease term", { yAxis: "right" }),
    ]),

    widget(0, 22, 12, 6, "Queue depths", [
      queueMetric(queues.hostWork, "host work visible"),
      ["AWS/SQS", "ApproximateNumberOfMessagesNotVisible", "QueueName", queues.hostWork, { stat: "Maximum", label: "host work in flight" }],
      queueMetric(queues.lifecycle, "lifecycle visible"),
      queueMetric(queues.hostWorkDlq, "host-work DLQ"),
      queueMetric(queues.lifecycleDlq, "lifecycle DLQ"),
    ]),
    widget(
      12,
      22,
      12,
      6,
      "Function errors and throttles",
      functionNames.flatMap((name) => [
        ["AWS/Lambda", "Errors", "FunctionName", name, { stat: "Sum", label: `${name} errors` }],
        ["AWS/Lambda", "Throttles", "FunctionName", name, { stat: "Sum", label: `${name} throttles` }],
      ]),
    ),
  ];
  return JSON.stringify({ start: "-PT3H", periodOverride: "inherit", widgets });
}

/** A DynamoDB table ARN: `arn:<partition>:dynamodb:<region>:<account>:table/<name>`. */
const TABLE_ARN = /^arn:(aws[a-z-]*):dynamodb:([a-z0-9-]+):(\d{12}):table\/([A-Za-z0-9_.-]{3,255})$/;
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;
const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

/**
 * The two tables every deployment of a site shares: the lease (the election) and the admission
 * table (the site's registry of hosts, their credentials' expiries and renewal's state). A failover
 * changes which deployment works, never what the site knows, so both must be one per site. Each is
 * described by the same four params, prefixed `lease` or `admission`:
 *
 * - `own`: this stack creates `<prefix>-<suffix>` in its Region (the default; the first deployment
 *   of a site, or every deployment of a single-deployment site);
 * - `own-global`: this stack creates it as a multi-Region strongly consistent (MRSC) global table,
 *   with `<kind>ReplicaRegions` (and an optional `<kind>WitnessRegion`);
 * - `external`: the `<kind>Table` param names an existing table (a name in this account and
 *   Region, or an ARN in any Region or account); none is created and every statement names it.
 *
 * Every write to either is a conditional write checked against the one current value. That rules
 * out a standard (multi-Region eventually consistent) global table: each Region checks conditions
 * against its own replica and conflicts resolve last-writer-wins, so two Regions could both win a
 * term, or both admit and claim one host.
 */
const SITE_TABLES = {
  lease: { suffix: "lease", why: "it would create a lease table of its own and lead as well" },
  admission: {
    suffix: "admission",
    why: "it would keep a registry of its own, and after a failover it would renew none of the hosts the other deployments provisioned",
  },
};

/** Where one of the site's tables lives; `params` are that table's four params, unprefixed. */
function siteTableTopology(kind, { params, prefix, region }) {
  const name = (param) => `${kind}${param}`;
  const external = params.table.trim();
  const replicaRegions = splitList(params.replicaRegions);
  const witnessRegion = params.witnessRegion.trim();
  const consistency = params.consistency.trim().toUpperCase() || "STRONG";
  if (consistency !== "STRONG") {
    throw new Error(
      `param ${name("MultiRegionConsistency")}=${params.consistency}: the ${kind} table cannot be a multi-Region eventually ` +
        "consistent (standard) global table: each Region checks conditions against its own replica and resolves " +
        `conflicts last-writer-wins, so two deployments can both win. Use one home-Region table (${name("Table")}=<ARN>) ` +
        `or a multi-Region strongly consistent one (${name("ReplicaRegions")}); see docs/deploy.md`,
    );
  }
  if (external && (replicaRegions.length > 0 || witnessRegion)) {
    throw new Error(`param ${name("Table")} names an existing ${kind} table; ${name("ReplicaRegions")} and ${name("WitnessRegion")} only apply to a table this stack creates`);
  }
  if (witnessRegion && replicaRegions.length === 0) {
    throw new Error(`param ${name("WitnessRegion")} needs ${name("ReplicaRegions")} (a witness belongs to a multi-Region strongly consistent table)`);
  }
  if (external) return externalTable(name("Table"), external, region);
  const tableName = `${prefix}-${SITE_TABLES[kind].suffix}`;
  // The roles name the table by ARN, as they do an existing one: one expression in every layout.
  const ownArn = sub(regionalArn("dynamodb", `table/${tableName}`));
  if (replicaRegions.length === 0) return { layout: "own", tableName, tableArn: ownArn, tableRegion: region };
  const regions = globalRegions(name, region, replicaRegions, witnessRegion);
  return { layout: "own-global", tableName, tableArn: ownArn, tableRegion: region, ...regions };
}

function externalTable(param, external, region) {
  const arn = TABLE_ARN.exec(external);
  if (arn) return { layout: "external", tableName: external, tableArn: external, tableRegion: arn[2] };
  if (external.startsWith("arn:")) {
    throw new Error(`param ${param}=${external} is not a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)`);
  }
  if (!TABLE_NAME.test(external)) {
    throw new Error(`param ${param}=${external} is not a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -) or a table ARN`);
  }
  return { layout: "external", tableName: external, tableArn: sub(regionalArn("dynamodb", `table/${external}`)), tableRegion: region };
}

/** MRSC: exactly three Regions, either three replicas or two replicas and a witness, in one Region set. */
function globalRegions(name, region, replicaRegions, witnessRegion) {
  const others = replicaRegions.filter((candidate) => candidate !== region);
  const all = [region, ...others, ...(witnessRegion ? [witnessRegion] : [])];
  for (const candidate of all) {
    if (!REGION.test(candidate)) throw new Error(`param ${name("ReplicaRegions")}/${name("WitnessRegion")}: "${candidate}" is not an AWS Region name`);
  }
  if (new Set(all).size !== all.length) {
    throw new Error(`params ${name("ReplicaRegions")} and ${name("WitnessRegion")}: each Region may appear once (the witness is not a replica)`);
  }
  if (all.length !== 3) {
    throw new Error(
      `a multi-Region strongly consistent ${name("")} table spans exactly three Regions (three replicas, or two replicas and a ` +
        `witness); got ${all.join(", ")} (this stack's Region ${region} is always a replica)`,
    );
  }
  return { replicas: [region, ...others], witnesses: witnessRegion ? [witnessRegion] : [] };
}

/** The four params of one site table, read through osls. */
async function siteTableParams(kind, resolveVariable) {
  return {
    table: await resolveVariable(`param:${kind}Table, ''`),
    replicaRegions: await resolveVariable(`param:${kind}ReplicaRegions, ''`),
    witnessRegion: await resolveVariable(`param:${kind}WitnessRegion, ''`),
    consistency: await resolveVariable(`param:${kind}MultiRegionConsistency, 'STRONG'`),
  };
}

/**
 * Both site tables. A stack that joins a site (it names the site's lease table, says it is a
 * standby, or turns off the paused alarm as only a standby needs) must name the site's admission
 * table too, and a standby must name both: with a table of its own it would lead on its own lease,
 * or lead blind after a failover.
 */
function siteTables({ params, prefix, region, standby = false, pausedAlarm = true }) {
  const lease = siteTableTopology("lease", { params: params.lease, prefix, region });
  const admission = siteTableTopology("admission", { params: params.admission, prefix, region });
  const because = standby
    ? "this stack is a standby (param standby=true)"
    : !pausedAlarm
      ? "this stack has param pausedAlarm=false, which only a standby needs,"
      : lease.layout === "external"
        ? "param leaseTable names the site's existing lease table"
        : undefined;
  for (const [kind, table] of [["lease", lease], ["admission", admission]]) {
    if (because === undefined || table.layout === "external") continue;
    const standbyHint = standby || pausedAlarm ? "" : "; a standby also sets standby=true";
    throw new Error(
      `${because} but param ${kind}Table is empty: ${SITE_TABLES[kind].why}. Set ${kind}Table to the name or ARN of the site's ` +
        `${kind} table (the ${kind === "lease" ? "LeaseTableName" : "AdmissionTableName"} output of the stack that owns it${standbyHint}; ` +
        'docs/deploy.md, "Leader and standby")',
    );
  }
  return { lease, admission };
}

/**
 * The site tables this stack creates, as a `resources` map osls merges into the template: the
 * tables it owns, none of those an existing one stands for (a key left out, not set to null, which
 * osls's packager cannot handle). `LeaseTable` and `AdmissionTable` keep the logical ids and type
 * existing stacks hold, so an update never replaces them.
 */
function siteTableResources({ lease, admission }) {
  return { Resources: { ...tableResource("Lease", lease, leaseTableProperties), ...tableResource("Admission", admission, admissionTableProperties) } };
}

const pointInTimeRecovery = { PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } };

function leaseTableProperties(tableName) {
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [{ AttributeName: "site", AttributeType: "S" }],
    KeySchema: [{ AttributeName: "site", KeyType: "HASH" }],
  };
}

/**
 * Hosts keyed by site and identity; entries no rule reads any more run out by TTL. The sparse index
 * `ledger-by-day` holds only the issuance ledger's records, by site and UTC day, for `issued --since`
 * (lib/dynamodb/issuance-ledger.ts).
 */
function admissionTableProperties(tableName) {
  return {
    TableName: tableName,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [
      { AttributeName: "site", AttributeType: "S" },
      { AttributeName: "identity", AttributeType: "S" },
      { AttributeName: "ledgerDay", AttributeType: "S" },
      { AttributeName: "issuedAt", AttributeType: "N" },
    ],
    KeySchema: [
      { AttributeName: "site", KeyType: "HASH" },
      { AttributeName: "identity", KeyType: "RANGE" },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: "ledger-by-day",
        KeySchema: [
          { AttributeName: "ledgerDay", KeyType: "HASH" },
          { AttributeName: "issuedAt", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "ALL" },
      },
    ],
    TimeToLiveSpecification: { AttributeName: "ttl", Enabled: true },
  };
}

function tableResource(id, table, propertiesOf) {
  if (table.layout === "external") return {};
  const retained = { DeletionPolicy: "Retain", UpdateReplacePolicy: "Retain" };
  const properties = propertiesOf(table.tableName);
  if (table.layout === "own") {
    return { [`${id}Table`]: { Type: "AWS::DynamoDB::Table", ...retained, Properties: { ...properties, ...pointInTimeRecovery, SSESpecification: { SSEEnabled: true } } } };
  }
  // Multi-Region strongly consistent: every conditional write and consistent read is decided across
  // the Regions, so it stays one lock. Point-in-time recovery on every replica, like the single table.
  return {
    [`${id}GlobalTable`]: {
      Type: "AWS::DynamoDB::GlobalTable",
      ...retained,
      Properties: {
        ...properties,
        MultiRegionConsistency: "STRONG",
        Replicas: table.replicas.map((name) => ({ Region: name, ...pointInTimeRecovery })),
        ...(table.witnesses.length > 0 ? { GlobalTableWitnesses: table.witnesses.map((name) => ({ Region: name })) } : {}),
        SSESpecification: { SSEEnabled: true },
      },
    },
  };
}

module.exports = async ({ resolveVariable }) => {
  const serviceDir = process.cwd();
  const configPath = await resolveVariable("param:provisionerConfig, 'config/provisioner.example.yaml'");
  const service = await resolveVariable("self:service");
  const stage = await resolveVariable("sls:stage");
  const region = await resolveVariable("self:provider.region");
  const subnetIds = splitList(await resolveVariable("param:subnetIds, ''"));
  const securityGroupIds = splitList(await resolveVariable("param:securityGroupIds, ''"));
  const kmsKeyArn = await resolveVariable("param:secretsKmsKeyArn, ''");
  const alarmTopicArn = await resolveVariable("param:alarmTopicArn, ''");
  const allowLiteralSecrets = String(await resolveVariable("param:allowLiteralSecrets, 'false'")) === "true";
  const helperLayerDir = await resolveVariable("param:helperLayerDir, ''");
  const standby = String(await resolveVariable("param:standby, 'false'")) === "true";
  const pausedAlarmParam = String(await resolveVariable("param:pausedAlarm, 'true'")) !== "false";
  const pausedAlarm = !standby && pausedAlarmParam;
  // `sls invoke local` without the queue URL params would try to read them from CloudFormation and
  // fail on credentials; scripts/sls-local.sh passes them from the local services' export lines.
  const invokeLocal = process.argv.includes("invoke") && process.argv.includes("local");
  if (invokeLocal && !(await resolveVariable("param:hostWorkQueueUrl, ''"))) {
    throw new Error(
      "sls invoke local needs the queues as params (deployed, they come from CloudFormation): " +
        "run scripts/sls-local.sh <function> in the shell with the export lines of npm run local:services or npm run local -- --keep-running",
    );
  }
  if ((subnetIds.length === 0) !== (securityGroupIds.length === 0)) {
    throw new Error("set both params subnetIds and securityGroupIds (comma lists), or neither");
  }
  if (helperLayerDir && !(existsSync(path.resolve(serviceDir, helperLayerDir)) && statSync(path.resolve(serviceDir, helperLayerDir)).isDirectory())) {
    throw new Error(`param helperLayerDir: ${helperLayerDir} is not a directory`);
  }

  const tables = siteTables({
    params: { lease: await siteTableParams("lease", resolveVariable), admission: await siteTableParams("admission", resolveVariable) },
    prefix: `${service}-${stage}`,
    region,
    standby,
    pausedAlarm: pausedAlarmParam,
  });


  const file = path.resolve(serviceDir, configPath);
  const text = await readFile(file, "utf8");
  const check = checkConfig(serviceDir, file, { allowLiteralSecrets, helperLayer: Boolean(helperLayerDir) });
  for (const warning of check.warnings) console.warn(`${configPath}: warning: ${warning.key}: ${warning.message}`);
  // Said where the user packages: otherwise the alarms only ever show in the console, unnoticed.
  if (!alarmTopicArn && !invokeLocal) {
    console.warn("note: param alarmTopicArn is not set: the stack's alarms are created without actions and notify nobody; pass --param alarmTopicArn=<SNS topic ARN>");
  }
  if (check.errors.length > 0) {
    const lines = check.errors.map((error) => `  ${error.key}: ${error.message}`);
    throw new Error(`${configPath} cannot be deployed (npm run check-config -- ${configPath}):\n${lines.join("\n")}`);
  }

  const site = check.site !== "" ? check.site : UNSET_SITE;
  const prefix = `${service}-${stage}`;
  const functionNames = FUNCTIONS.map((name) => `${prefix}-${name}`);
  const queues = {
    hostWork: `${prefix}-host-work`,
    hostWorkDlq: `${prefix}-host-work-dlq`,
    lifecycle: `${prefix}-lifecycle`,
    lifecycleDlq: `${prefix}-lifecycle-dlq`,
  };

  return {
    configYaml: text,
    site,
    metricsNamespace: NAMESPACE,
    serviceName: SERVICE_DIMENSION,
    // The default deployment_id: one stack per stage, Region and account, so two stacks of a site
    // sharing a lease table are never the same holder (the Region alone would make them one).
    // `sls invoke local` cannot resolve a CloudFormation function and has no account: `local` stands in.
    stackDeploymentId: invokeLocal ? `${stage}/${region}/local` : { "Fn::Join": ["/", [stage, { Ref: "AWS::Region" }, { Ref: "AWS::AccountId" }]] },
    discoverSchedule: check.discoverSchedule,
    secretsPolicy: Object.fromEntries(FUNCTIONS.map((fn) => [fn, secretsPolicy(check.references[fn] ?? [], kmsKeyArn)])),
    helperInvokeStatement: check.helperFunction
      ? { Effect: "Allow", Action: ["lambda:InvokeFunction"], Resource: helperFunctionArns(check.helperFunction) }
      : { Sid: "NoHelperFunction", Effect: "Deny", Action: ["lambda:InvokeFunction"], Resource: "*" },
    ...functionVpcs({ subnetIds, securityGroupIds }),
    alarmActions: alarmTopicArn ? [alarmTopicArn] : [],
    pausedAlarmActionsEnabled: pausedAlarm,
    layers: helperLayerDir
      ? {
          helper: {
            path: helperLayerDir,
            name: `${prefix}-helper`,
            description: "Executable provisioning helper, run from /opt by the provision function",
            compatibleRuntimes: ["nodejs22.x"],
            compatibleArchitectures: ["arm64"],
            retain: false,
          },
        }
      : {},
    provisionLayers: helperLayerDir ? [{ Ref: "HelperLambdaLayer" }] : [],
    dashboardBody: dashboardBody({ site, region, functionNames, queues }),
    leaseTableName: tables.lease.tableName,
    leaseTableArn: tables.lease.tableArn,
    admissionTableName: tables.admission.tableName,
    admissionTableArn: tables.admission.tableArn,
    siteTableResources: siteTableResources(tables),
  };
};

/**
 * osls prints a failing variable source's error under three lines of its own wrapping and with the
 * error's stack, eleven frames of osls internals: the user's problem was buried. Print it first, in
 * our words, and give osls an error without a stack. osls's own errors (a variable this one waits
 * on) pass through untouched: it acts on them.
 */
const resolveDeployment = module.exports;
module.exports = async (context) => {
  try {
    return await resolveDeployment(context);
  } catch (error) {
    if (!(error instanceof Error) || error.code === "MISSING_VARIABLE_DEPENDENCY" || error.constructor.name === "ServerlessError") throw error;
    console.error(`error: ${error.message}`);
    const shown = new Error(`${error.message.split("\n", 1)[0]} (printed above)`);
    shown.stack = shown.message;
    throw shown;
  }
};

module.exports.FUNCTIONS = FUNCTIONS;
module.exports.BROKER_FUNCTIONS = BROKER_FUNCTIONS;
module.exports.functionVpcs = functionVpcs;
module.exports.NAMESPACE = NAMESPACE;
module.exports.SERVICE_DIMENSION = SERVICE_DIMENSION;
module.exports.siteTables = siteTables;
module.exports.siteTableResources = siteTableResources;
