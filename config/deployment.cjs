/**
 * Package-time resolver for serverless.yml (`${file(./config/deployment.cjs):<key>}`).
 *
 * It reads the provisioner configuration file named by the `provisionerConfig` param and hands the
 * template what it needs from it, so nothing is configured twice:
 * - `configYaml`: the file's text, delivered unchanged as PROVISIONER_CONFIG_YAML (a plain string,
 *   so `sls invoke local` needs no AWS call to build the environment);
 * - `site`: the `site` metric dimension the alarms and the dashboard select;
 * - the ARNs of the secret references and of `helper_function`, so the IAM policies name exactly
 *   those resources and no others;
 * - `vpc`: the VpcConfig from the `subnetIds` / `securityGroupIds` params (absent when unset);
 * - `dashboardBody`: the CloudWatch dashboard's JSON;
 * - the site's lease table (`lease*` keys): owned by this stack (one Region, or a multi-Region
 *   strongly consistent global table), or an existing one named by the `leaseTable` param; see
 *   `leaseTopology`.
 *
 * CommonJS (.cjs) because osls loads resolver files with `require` and package.json says "module".
 */
/* global require, module, process */
/* eslint-disable @typescript-eslint/no-require-imports -- osls require()s resolver files */
"use strict";

const { readFile } = require("node:fs/promises");
const path = require("node:path");
const YAML = require("yaml");

/** The configuration keys that may hold `ssm:` / `secretsmanager:` references (lib/config/secrets.ts). */
const SECRET_KEYS = [
  "token",
  "broker_provisioning_password",
  "jwt_signing_key",
  "jwt_signing_token",
  "nats_token",
  "client_jwt",
  "client_seed",
];

/** The app's metric dimension value for an empty site (lib/observability/metrics.ts). */
const UNSET_SITE = "unset";
const NAMESPACE = "ChoriaProvisioner";
/** Powertools adds a `service` dimension (POWERTOOLS_SERVICE_NAME) next to the app's `site`. */
const SERVICE_DIMENSION = "choria-provisioner";
const REFERENCE = /^(ssm|secretsmanager):(.+)$/;

const sub = (text) => ({ "Fn::Sub": text });
const regionalArn = (service, rest) => `arn:\${AWS::Partition}:${service}:\${AWS::Region}:\${AWS::AccountId}:${rest}`;

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

function secretReferences(document, file) {
  const references = { ssm: [], secretsmanager: [] };
  for (const key of SECRET_KEYS) {
    const value = document[key];
    if (typeof value !== "string") continue;
    const match = REFERENCE.exec(value);
    if (!match) continue;
    if (match[1] === "ssm") references.ssm.push(ssmParameterArn(match[2]));
    else references.secretsmanager.push(secretArn(match[2]));
  }
  if (document.tls && typeof document.tls === "object") {
    for (const [key, value] of Object.entries(document.tls)) {
      if (typeof value === "string" && REFERENCE.test(value)) {
        throw new Error(`${file}: tls.${key} must be a file path; secret references are not resolved there`);
      }
    }
  }
  return references;
}

function splitList(text) {
  return String(text ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

async function readProvisionerConfig(serviceDir, configPath) {
  const file = path.resolve(serviceDir, configPath);
  const text = await readFile(file, "utf8");
  let document;
  try {
    document = YAML.parse(text, { version: "1.1" });
  } catch (error) {
    throw new Error(`${configPath} is not valid YAML: ${error.message}`);
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) {
    throw new Error(`${configPath} must be a YAML mapping`);
  }
  return { text, document };
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

  const widgets = [
    single(0, 0, 8, 4, "Nodes provisioned / hour", [metric("choria_provisioner_provisioned", "Sum", "provisioned")], {
      period: 3600,
    }),
    single(8, 0, 4, 4, "Busy workers", [metric("choria_provisioner_busy_workers", "Maximum", "busy")]),
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
      metric("choria_provisioner_busy_workers", "Maximum", "busy workers"),
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
      metric("choria_provisioner_discovery_capped", "Sum", "discoveries stopped at discovery_max_nodes"),
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
 * Where the site's lease lives. The lease item is the election between every deployment of a site,
 * so the deployments must share one item, and every write to it must be checked against the one
 * current value. That rules out a standard (multi-Region eventually consistent) global table: each
 * Region checks conditions against its own replica and conflicts resolve last-writer-wins, so two
 * Regions can both win and a term can go back. Three layouts are accepted:
 *
 * - `own`: this stack creates `<prefix>-lease` in its Region (the default; the first deployment of
 *   a site, or every deployment of a single-deployment site);
 * - `own-global`: this stack creates the lease table as a multi-Region strongly consistent (MRSC)
 *   global table, with `leaseReplicaRegions` (and an optional `leaseWitnessRegion`);
 * - `external`: the `leaseTable` param names an existing table (a name in this account and Region,
 *   or an ARN in any Region or account); no lease table is created and every lease statement
 *   names that table.
 */
function leaseTopology({ params, prefix, region }) {
  const external = params.leaseTable.trim();
  const replicaRegions = splitList(params.leaseReplicaRegions);
  const witnessRegion = params.leaseWitnessRegion.trim();
  const consistency = params.leaseMultiRegionConsistency.trim().toUpperCase() || "STRONG";
  if (consistency !== "STRONG") {
    throw new Error(
      `param leaseMultiRegionConsistency=${params.leaseMultiRegionConsistency}: the lease cannot live in a multi-Region eventually ` +
        "consistent (standard) global table: each Region checks the lease conditions against its own replica and resolves " +
        "conflicts last-writer-wins, so two deployments can both win a term. Use one home-Region table (leaseTable=<ARN>) " +
        "or a multi-Region strongly consistent one (leaseReplicaRegions); see docs/deploy.md",
    );
  }
  if (external && (replicaRegions.length > 0 || witnessRegion)) {
    throw new Error("param leaseTable names an existing lease table; leaseReplicaRegions and leaseWitnessRegion only apply to a table this stack creates");
  }
  if (witnessRegion && replicaRegions.length === 0) {
    throw new Error("param leaseWitnessRegion needs leaseReplicaRegions (a witness belongs to a multi-Region strongly consistent table)");
  }

  if (external) {
    const arn = TABLE_ARN.exec(external);
    if (arn) {
      return { layout: "external", tableName: external, tableArn: external, tableRegion: arn[2] };
    }
    if (external.startsWith("arn:")) {
      throw new Error(`param leaseTable=${external} is not a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)`);
    }
    if (!TABLE_NAME.test(external)) {
      throw new Error(`param leaseTable=${external} is not a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -) or a table ARN`);
    }
    return { layout: "external", tableName: external, tableArn: sub(regionalArn("dynamodb", `table/${external}`)), tableRegion: region };
  }

  const tableName = `${prefix}-lease`;
  if (replicaRegions.length === 0) {
    return { layout: "own", tableName, tableArn: { "Fn::GetAtt": ["LeaseTable", "Arn"] }, tableRegion: region };
  }
  const others = replicaRegions.filter((name) => name !== region);
  const all = [region, ...others, ...(witnessRegion ? [witnessRegion] : [])];
  for (const name of all) {
    if (!REGION.test(name)) throw new Error(`param leaseReplicaRegions/leaseWitnessRegion: "${name}" is not an AWS Region name`);
  }
  if (new Set(all).size !== all.length) {
    throw new Error("params leaseReplicaRegions and leaseWitnessRegion: each Region may appear once (the witness is not a replica)");
  }
  // MRSC: exactly three Regions, either three replicas or two replicas and a witness, in one Region set.
  if (all.length !== 3) {
    throw new Error(
      `a multi-Region strongly consistent lease table spans exactly three Regions (three replicas, or two replicas and a ` +
        `witness); got ${all.join(", ")} (this stack's Region ${region} is always a replica)`,
    );
  }
  return {
    layout: "own-global",
    tableName,
    tableArn: { "Fn::GetAtt": ["LeaseGlobalTable", "Arn"] },
    tableRegion: region,
    replicas: [region, ...others],
    witnesses: witnessRegion ? [witnessRegion] : [],
  };
}

/** The GlobalTable's regional settings; point-in-time recovery on every replica like the single table. */
function globalTableReplicas(regions) {
  return regions.map((name) => ({ Region: name, PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } }));
}

module.exports = async ({ resolveVariable }) => {
  const serviceDir = process.cwd();
  const configPath = await resolveVariable("param:provisionerConfig, 'config/provisioner.example.yaml'");
  const service = await resolveVariable("self:service");
  const stage = await resolveVariable("sls:stage");
  const region = await resolveVariable("self:provider.region");
  const subnetIds = splitList(await resolveVariable("param:subnetIds, ''"));
  const securityGroupIds = splitList(await resolveVariable("param:securityGroupIds, ''"));
  if ((subnetIds.length === 0) !== (securityGroupIds.length === 0)) {
    throw new Error("set both params subnetIds and securityGroupIds (comma lists), or neither");
  }

  const lease = leaseTopology({
    params: {
      leaseTable: await resolveVariable("param:leaseTable, ''"),
      leaseReplicaRegions: await resolveVariable("param:leaseReplicaRegions, ''"),
      leaseWitnessRegion: await resolveVariable("param:leaseWitnessRegion, ''"),
      leaseMultiRegionConsistency: await resolveVariable("param:leaseMultiRegionConsistency, 'STRONG'"),
    },
    prefix: `${service}-${stage}`,
    region,
  });

  const { text, document } = await readProvisionerConfig(serviceDir, configPath);
  const site = typeof document.site === "string" && document.site !== "" ? document.site : UNSET_SITE;
  const secrets = secretReferences(document, configPath);
  const helperFunction = typeof document.helper_function === "string" ? document.helper_function : "";
  const prefix = `${service}-${stage}`;
  const functionNames = [
    "discover",
    "leaseKeeper",
    "lifecycleBridge",
    "lifecycle",
    "provision",
    "status",
    "reprovision",
    "release",
  ].map((name) => `${prefix}-${name}`);
  const queues = {
    hostWork: `${prefix}-host-work`,
    hostWorkDlq: `${prefix}-host-work-dlq`,
    lifecycle: `${prefix}-lifecycle`,
    lifecycleDlq: `${prefix}-lifecycle-dlq`,
  };

  return {
    configYaml: text,
    site,
    leaderElection: document.leader_election === true ? "true" : "false",
    hasSsmSecrets: secrets.ssm.length > 0 ? "true" : "false",
    ssmParameterArns: secrets.ssm,
    hasSecretsManagerSecrets: secrets.secretsmanager.length > 0 ? "true" : "false",
    secretsManagerArns: secrets.secretsmanager,
    hasHelperFunction: helperFunction ? "true" : "false",
    helperFunctionArns: helperFunction ? helperFunctionArns(helperFunction) : [],
    hasVpc: subnetIds.length > 0 ? "true" : "false",
    ...(subnetIds.length > 0 ? { vpc: { subnetIds, securityGroupIds } } : {}),
    dashboardBody: dashboardBody({ site, region, functionNames, queues }),
    ownsLeaseTable: lease.layout === "own" ? "true" : "false",
    ownsLeaseGlobalTable: lease.layout === "own-global" ? "true" : "false",
    leaseTableName: lease.tableName,
    leaseTableArn: lease.tableArn,
    // Placeholders keep the (then unused) GlobalTable resource well-formed when the stack does not create it.
    leaseGlobalTableReplicas: globalTableReplicas(lease.replicas ?? [region]),
    ...(lease.witnesses?.length ? { leaseGlobalTableWitnesses: lease.witnesses.map((name) => ({ Region: name })) } : {}),
  };
};

module.exports.SECRET_KEYS = SECRET_KEYS;
module.exports.leaseTopology = leaseTopology;
