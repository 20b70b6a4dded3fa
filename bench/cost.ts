/**
 * What the deployment costs on AWS, from what the local runtime counts while it works: Lambda
 * invocations and their billed durations per function and memory size (the emulated runtime's
 * ledger, memory from serverless.yml), DynamoDB requests (the counting proxy in front of DynamoDB
 * Local), SQS requests (the Apps' and the emulated event source pollers', long-polling 20 s as
 * Lambda's do) and scheduled invocations (EventBridge). Two phases on one stack of two deployments
 * (leader and standby, as deployed): provisioning a simulated fleet, then an idle window scaled to a
 * month, and that month again with the functions that reach the broker in a VPC (VPC_TOPOLOGY:
 * its endpoints' hours, and the SQS bytes the proxies counted through them). Writes
 * reports/cost.json and reports/cost.md; --reprice prices the recorded counts again.
 *
 *   npm run bench:cost -- [--nodes 200] [--idle-minutes 3]
 */
import { readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { dynamoDbSplit } from "../dev/local/request-counter";
import { startLocalStack, type LocalStack } from "../dev/local/stack";
import { decimalNumber, parsedOptions, runBenchmark, wholeNumber } from "./command";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const REPO_ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

/**
 * us-east-1 list prices, on-demand, without free tiers, as published on the AWS pricing pages
 * (Lambda x86, DynamoDB on-demand after the November 2024 cut, SQS standard, EC2 Linux Graviton).
 * Re-check them before quoting: they are a table with a date, not a live read.
 */
export const PRICES = {
  date: "2025-06 (AWS public pricing pages, us-east-1)",
  lambdaPerGbSecond: 0.0000166667,
  lambdaPerMillionRequests: 0.2,
  dynamoDbPerMillionWriteUnits: 0.625,
  dynamoDbPerMillionReadUnits: 0.125,
  sqsPerMillionRequests: 0.4,
  /** EventBridge rules on a schedule (what serverless.yml's `schedule` events create) are not charged; EventBridge Scheduler would be $1.00 per million. */
  eventBridgeScheduledRulePerMillion: 0,
  ec2T4gSmallPerHour: 0.0168,
  ebsGp3PerGbMonth: 0.08,
  /** VPC pricing page: per NAT gateway-hour and per GB it processes (data transfer out of AWS on top, none here). */
  natGatewayPerHour: 0.045,
  natGatewayPerGb: 0.045,
  /** PrivateLink pricing page: an interface endpoint per hour in each Availability Zone, and per GB processed (first PB). */
  interfaceEndpointPerAzHour: 0.01,
  interfaceEndpointPerGb: 0.01,
  /** Gateway endpoints (DynamoDB, S3) have no hourly or data charge. */
  gatewayEndpointPerHour: 0,
  /** A NAT instance's smallest Graviton size (beside the managed NAT gateway in docs/deploy.md). */
  ec2T4gNanoPerHour: 0.0042,
} as const;

const MINUTES_PER_MONTH = 30 * 24 * 60;
/** From the last restart to the start of the idle window (a keeper period and a discovery interval). */
const SETTLE_MS = 60_000;
const HOURS_PER_MONTH = MINUTES_PER_MONTH / 60;

/**
 * The cheapest network that lets the broker functions (config/deployment.cjs BROKER_FUNCTIONS) reach
 * brokers on a private network, priced per deployment: two Availability Zones (Lambda's advice for a
 * VPC function's subnets), interface endpoints for what those functions call (SQS for host work and
 * the DLQs, Secrets Manager for the configuration's references at a cold start) and the free DynamoDB
 * gateway endpoint; CloudWatch (logs, EMF metrics) and X-Ray need none, Lambda sends them. `vpcs`:
 * leader and standby each in their own VPC (a standby in another Region cannot share one); two
 * deployments in one VPC share its endpoints and pay half. docs/deploy.md, "Running in a VPC".
 */
export const VPC_TOPOLOGY: VpcTopology = {
  azs: 2,
  vpcs: 2,
  interface_endpoints: ["sqs", "secretsmanager"],
  gateway_endpoints: ["dynamodb"],
};

/** What the VPC figure priced (reports/cost.json `dollars_per_idle_month_vpc.topology`). */
export interface VpcTopology {
  /** Availability Zones the functions' subnets and each interface endpoint span. */
  azs: number;
  /** VPCs with their own endpoints: 2 for leader and standby apart. */
  vpcs: number;
  interface_endpoints: readonly string[];
  gateway_endpoints: readonly string[];
}

export interface Counts {
  seconds: number;
  lambda: Record<string, { invocations: number; gbSeconds: number }>;
  dynamoDb: { writes: number; reads: number; other: number };
  sqsRequests: number;
  scheduledInvocations: number;
  /** HTTP bytes both ways of the Apps' requests (absent in reports recorded before they were counted). */
  bytes?: { dynamoDb: number; sqsApp: number };
}

export interface Dollars {
  lambdaCompute: number;
  lambdaRequests: number;
  dynamoDb: number;
  sqs: number;
  eventBridge: number;
  total: number;
}

/** Dollars for a set of counts: a write or strongly consistent read of an item under 1 KB is one unit. */
export function dollars(counts: Counts, scale = 1): Dollars {
  const gbSeconds = Object.values(counts.lambda).reduce((sum, f) => sum + f.gbSeconds, 0);
  const invocations = Object.values(counts.lambda).reduce((sum, f) => sum + f.invocations, 0);
  const lambdaCompute = gbSeconds * PRICES.lambdaPerGbSecond * scale;
  const lambdaRequests = (invocations / 1e6) * PRICES.lambdaPerMillionRequests * scale;
  const dynamoDb = ((counts.dynamoDb.writes / 1e6) * PRICES.dynamoDbPerMillionWriteUnits + (counts.dynamoDb.reads / 1e6) * PRICES.dynamoDbPerMillionReadUnits) * scale;
  const sqs = (counts.sqsRequests / 1e6) * PRICES.sqsPerMillionRequests * scale;
  const eventBridge = (counts.scheduledInvocations / 1e6) * PRICES.eventBridgeScheduledRulePerMillion * scale;
  return { lambdaCompute, lambdaRequests, dynamoDb, sqs, eventBridge, total: lambdaCompute + lambdaRequests + dynamoDb + sqs + eventBridge };
}

/** An idle month with the broker functions in a VPC: the month as measured, plus what the topology's endpoints cost. */
export interface VpcDollars extends Dollars {
  /** Every interface endpoint in every AZ of every VPC, all month; gateway endpoints cost nothing. */
  endpointHours: number;
  /** GB through the interface endpoints: the Apps' SQS traffic (all functions: an upper bound for those in the VPC). */
  endpointData: number;
  endpointGbPerMonth: number;
  /** false: the counts hold no bytes (recorded before they were counted), so the data term is left at 0. */
  endpointGbMeasured: boolean;
  topology: VpcTopology;
}

/**
 * `idle` (an idle month's dollars) in the VPC `topology`; `sqsAppGbPerMonth`: the Apps' SQS traffic
 * scaled to the month, undefined if it was not counted. DynamoDB goes through the gateway endpoint,
 * free; Secrets Manager's few kilobytes at a cold start are left out.
 */
export function vpcIdleMonth(idle: Dollars, sqsAppGbPerMonth: number | undefined, topology: VpcTopology = VPC_TOPOLOGY): VpcDollars {
  const endpointAzs = topology.vpcs * topology.azs * topology.interface_endpoints.length;
  const endpointHours = endpointAzs * PRICES.interfaceEndpointPerAzHour * HOURS_PER_MONTH + topology.vpcs * topology.gateway_endpoints.length * PRICES.gatewayEndpointPerHour * HOURS_PER_MONTH;
  const endpointGbPerMonth = sqsAppGbPerMonth ?? 0;
  const endpointData = endpointGbPerMonth * PRICES.interfaceEndpointPerGb;
  return { ...idle, endpointHours, endpointData, endpointGbPerMonth, endpointGbMeasured: sqsAppGbPerMonth !== undefined, topology, total: idle.total + endpointHours + endpointData };
}

/** Every dollar figure of the report, from its counts (a run's, or recorded ones priced again). */
export function priced(provisioning: Counts, idle: Counts, restarted: number) {
  const idleScale = MINUTES_PER_MONTH / (idle.seconds / 60);
  const perIdleMonth = dollars(idle, idleScale);
  return {
    dollars_per_1000_hosts: dollars(provisioning, 1_000 / Math.max(1, restarted)),
    dollars_per_idle_month: perIdleMonth,
    dollars_per_idle_month_vpc: vpcIdleMonth(perIdleMonth, idle.bytes ? (idle.bytes.sqsApp / 1e9) * idleScale : undefined),
    // The Go daemon: two t4g.small (2 GB: its VmHWM reached 0.5-1.6 GB at 64-256 workers in bench:peer) with 8 GB gp3 each, leader and standby.
    go_daemon_dollars_per_month: 2 * (PRICES.ec2T4gSmallPerHour * HOURS_PER_MONTH + 8 * PRICES.ebsGp3PerGbMonth),
  };
}

/** The difference of two snapshots of the stack's counters. */
export function between(before: Counts, after: Counts): Counts {
  const lambda: Counts["lambda"] = {};
  for (const [name, entry] of Object.entries(after.lambda)) {
    const prior = before.lambda[name] ?? { invocations: 0, gbSeconds: 0 };
    lambda[name] = { invocations: entry.invocations - prior.invocations, gbSeconds: entry.gbSeconds - prior.gbSeconds };
  }
  return {
    seconds: after.seconds - before.seconds,
    lambda,
    dynamoDb: { writes: after.dynamoDb.writes - before.dynamoDb.writes, reads: after.dynamoDb.reads - before.dynamoDb.reads, other: after.dynamoDb.other - before.dynamoDb.other },
    sqsRequests: after.sqsRequests - before.sqsRequests,
    scheduledInvocations: after.scheduledInvocations - before.scheduledInvocations,
    ...(after.bytes && before.bytes ? { bytes: { dynamoDb: after.bytes.dynamoDb - before.bytes.dynamoDb, sqsApp: after.bytes.sqsApp - before.bytes.sqsApp } } : {}),
  };
}

/** Function names without the deployment prefix, so leader and standby add up per function. */
const functionOf = (name: string) => name.replace(/^.*-(discover|lease-keeper|lifecycle|provision|renew)$/, "$1");
const SCHEDULED = new Set(["discover", "lease-keeper", "renew"]);

function snapshot(stack: LocalStack, startedAt: number): Counts {
  const lambda: Counts["lambda"] = {};
  for (const [name, entry] of Object.entries(stack.ledger.byFunction())) {
    const key = functionOf(name);
    const sum = (lambda[key] ??= { invocations: 0, gbSeconds: 0 });
    sum.invocations += entry.invocations;
    sum.gbSeconds += entry.gbSeconds;
  }
  const scheduledInvocations = Object.entries(lambda)
    .filter(([name]) => SCHEDULED.has(name))
    .reduce((sum, [, entry]) => sum + entry.invocations, 0);
  return {
    seconds: (Date.now() - startedAt) / 1000,
    lambda,
    dynamoDb: dynamoDbSplit(stack.traffic.dynamoDb.operations),
    sqsRequests: stack.traffic.sqsApp.total() + stack.traffic.sqsEventSources.total(),
    scheduledInvocations,
    // The event sources' receives are Lambda's own, outside any VPC of the functions: not counted here.
    bytes: { dynamoDb: stack.traffic.dynamoDb.bytes(), sqsApp: stack.traffic.sqsApp.bytes() },
  };
}

const money = (value: number) => (value >= 0.01 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`);

async function main(): Promise<void> {
  const values = parsedOptions("bench:cost", { nodes: { type: "string" }, "idle-minutes": { type: "string" }, help: { type: "boolean" }, "markdown-only": { type: "boolean" }, reprice: { type: "boolean" } });
  if (values.help) {
    process.stdout.write(
      "Usage: npm run bench:cost -- [--nodes 200] [--idle-minutes 3] [--markdown-only | --reprice]\nWrites reports/cost.json and reports/cost.md (--markdown-only: cost.md from cost.json; --reprice: cost.json's counts priced again with the price table, then cost.md).\n",
    );
    return;
  }
  if (values["markdown-only"] || values.reprice) {
    const recorded = JSON.parse(await readFile(join(REPO_ROOT, "reports/cost.json"), "utf8")) as Report;
    const failover = await recordedFailover();
    const report: Report = values.reprice
      ? { ...recorded, prices: PRICES, ...priced(recorded.provisioning, recorded.idle, recorded.restarted), ...(failover !== undefined ? { failover_s: failover } : {}) }
      : recorded;
    if (values.reprice) await writeFile(join(REPO_ROOT, "reports/cost.json"), `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(join(REPO_ROOT, "reports/cost.md"), markdown(report));
    return;
  }
  const nodes = wholeNumber("bench:cost", "--nodes", values.nodes, 200);
  const idleMinutes = decimalNumber("bench:cost", "--idle-minutes", values["idle-minutes"], 3, { above: 0 });
  const loadStart = loadavg()[0] ?? 0;
  // Lambda's SQS pollers long-poll 20 s; the emulator's default of 2 s would count ten times the idle receives.
  const stack = await startLocalStack({ nodes, deployments: ["leader", "standby"], helper: "bash", waitTimeSeconds: 20, renewEverywhere: true });
  try {
    const startedAt = Date.now();
    const zero = snapshot(stack, startedAt);
    stack.start();
    const restarted = new Set<string>();
    const boundMs = Math.max(300_000, nodes * 1_000);
    while (restarted.size < nodes && Date.now() - startedAt < boundMs) {
      await new Promise((done) => setTimeout(done, 1_000));
      for (const entry of stack.fleet.record) if (entry.action === "restart" && entry.outcome === 0) restarted.add(entry.identity);
      stack.fleet.record.splice(0);
    }
    // The provisioning phase ends a minute after the last restart: the leader's ticks admit the
    // fleet's startup events (each a conditional write that finds the host admitted), the provision
    // invocations record each restart once confirmed, the next discovery finds no one. All of that is
    // per-host work; the idle window starts after it.
    await new Promise((done) => setTimeout(done, SETTLE_MS));
    const provisioned = snapshot(stack, startedAt);
    process.stdout.write(`provisioned ${restarted.size}/${nodes} in ${provisioned.seconds.toFixed(0)} s; idle for ${idleMinutes} min\n`);
    await new Promise((done) => setTimeout(done, idleMinutes * 60_000));
    const idle = snapshot(stack, startedAt);
    const provisioning = between(zero, provisioned);
    const idleWindow = between(provisioned, idle);
    const figures = priced(provisioning, idleWindow, restarted.size);
    const failover = await recordedFailover();
    const report: Report = {
      generated: new Date().toISOString(),
      ...(failover !== undefined ? { failover_s: failover } : {}),
      cpus: cpus().length,
      load_average_1m_at_start: Math.round(loadStart * 100) / 100,
      nodes,
      restarted: restarted.size,
      prices: PRICES,
      provisioning,
      idle: idleWindow,
      ...figures,
    };
    await writeFile(join(REPO_ROOT, "reports/cost.json"), `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(join(REPO_ROOT, "reports/cost.md"), markdown(report));
    process.stdout.write(
      `per 1,000 hosts ${money(figures.dollars_per_1000_hosts.total)}, per idle month ${money(figures.dollars_per_idle_month.total)} (${money(figures.dollars_per_idle_month_vpc.total)} in a VPC), Go daemon ${money(figures.go_daemon_dollars_per_month)} a month\n`,
    );
  } finally {
    await stack.stop();
  }
}

interface Report extends ReturnType<typeof priced> {
  generated: string;
  /** Median failover from the leader's last renewal, from reports/failover.json of the same checkout. */
  failover_s?: number;
  cpus: number;
  load_average_1m_at_start: number;
  nodes: number;
  restarted: number;
  prices: typeof PRICES;
  provisioning: Counts;
  idle: Counts;
}

/** The idle month's dollars by what they pay for, largest first, and the functions' share of the compute. */
function whereTheIdleMonthGoes(r: Report): string {
  const month = r.dollars_per_idle_month;
  const items: Array<[string, number]> = [
    ["SQS requests (the event sources' long polls of four queues, the ticks' sends and deletes)", month.sqs],
    ["Lambda compute", month.lambdaCompute],
    ["DynamoDB (a lease round per keeper run and tick, discovery's reads)", month.dynamoDb],
    ["Lambda requests", month.lambdaRequests],
  ];
  const share = (value: number) => `${Math.round((value / Math.max(month.total, 1e-9)) * 100)} %`;
  const gbSeconds = Object.values(r.idle.lambda).reduce((sum, f) => sum + f.gbSeconds, 0);
  const byFunction = Object.entries(r.idle.lambda)
    .filter(([, f]) => f.invocations > 0)
    .sort(([, a], [, b]) => b.gbSeconds - a.gbSeconds)
    .map(([name, f]) => `${name} ${Math.round((f.gbSeconds / Math.max(gbSeconds, 1e-9)) * 100)} % (${f.invocations} invocations)`);
  const ranked = items.sort(([, a], [, b]) => b - a).map(([what, value]) => `${what} ${money(value)} (${share(value)})`);
  return `**Where the idle month goes:** ${ranked.join("; ")}. The compute by function: ${byFunction.join(", ")}. Nothing runs between the keeper's runs and the ticks it arms.`;
}

/** Median failover from reports/failover.json, if that bench has run in this checkout. */
async function recordedFailover(): Promise<number | undefined> {
  try {
    const recorded = JSON.parse(await readFile(join(REPO_ROOT, "reports/failover.json"), "utf8")) as { failover_s?: unknown };
    return typeof recorded.failover_s === "number" ? recorded.failover_s : undefined;
  } catch {
    return undefined;
  }
}

/** What one deployment's VPC network costs a month in each topology of docs/deploy.md (fixed part; per GB beside it). */
function vpcAlternatives(topology: VpcTopology): string[] {
  const endpoints = topology.interface_endpoints.length * topology.azs * PRICES.interfaceEndpointPerAzHour * HOURS_PER_MONTH;
  const nat = (count: number) => count * PRICES.natGatewayPerHour * HOURS_PER_MONTH;
  return [
    "| one deployment's VPC (30 days) | fixed a month | per GB processed |",
    "|---|---|---|",
    `| interface endpoints ${topology.interface_endpoints.join(" + ")} in ${topology.azs} AZs, DynamoDB gateway endpoint (priced above) | ${money(endpoints)} | $${PRICES.interfaceEndpointPerGb} |`,
    `| one NAT gateway (one AZ), DynamoDB gateway endpoint | ${money(nat(1))} | $${PRICES.natGatewayPerGb} |`,
    `| a NAT gateway in each of ${topology.azs} AZs, DynamoDB gateway endpoint | ${money(nat(topology.azs))} | $${PRICES.natGatewayPerGb} |`,
    `| a NAT instance (t4g.nano, 8 GB gp3), DynamoDB gateway endpoint | ${money(PRICES.ec2T4gNanoPerHour * HOURS_PER_MONTH + 8 * PRICES.ebsGp3PerGbMonth)} | none (EC2 data transfer rules) |`,
  ];
}

function markdown(r: Report): string {
  const lines: string[] = [
    "# What it costs on AWS",
    "",
    `Generated ${r.generated} by \`npm run bench:cost\` (bench/cost.ts) on ${r.cpus} cores, 1-minute load ${r.load_average_1m_at_start} at the start. Every count below was measured on the local stack (serverless.yml's defaults: AWS timings, two deployments as leader and standby, the bash + jq helper, SQS pollers long-polling 20 s); the prices are a table with its date, not a live read.`,
    "",
    "## Result",
    "",
    "| | Lambda compute | Lambda requests | DynamoDB | SQS | EventBridge | total |",
    "|---|---|---|---|---|---|---|",
  ];
  const row = (name: string, d: Dollars) => `| ${name} | ${money(d.lambdaCompute)} | ${money(d.lambdaRequests)} | ${money(d.dynamoDb)} | ${money(d.sqs)} | ${money(d.eventBridge)} | **${money(d.total)}** |`;
  lines.push(row(`per 1,000 hosts provisioned (measured on ${r.restarted}/${r.nodes}, scaled)`, r.dollars_per_1000_hosts));
  lines.push(row(`per idle month, leader + standby (measured over ${(r.idle.seconds / 60).toFixed(1)} min, scaled to 30 days)`, r.dollars_per_idle_month));
  const vpc = r.dollars_per_idle_month_vpc;
  const topology = vpc.topology;
  const dataNote = vpc.endpointGbMeasured
    ? `${money(vpc.endpointData)} for the ${vpc.endpointGbPerMonth.toFixed(2)} GB a month of the Apps' SQS traffic the proxies counted (every function's: an upper bound for those in the VPC)`
    : "no data term: these counts were recorded before the bench counted bytes (at idle the broker functions send SQS almost nothing; a run now counts it)";
  lines.push(
    "",
    `**In a VPC** (brokers on a private network; docs/deploy.md, "Running in a VPC"): the idle month above plus ${money(vpc.endpointHours)} for interface endpoints (${topology.interface_endpoints.join(", ")}) in ${topology.azs} Availability Zones of each of ${topology.vpcs} VPCs (leader and standby apart; one VPC shared by both halves it), the ${topology.gateway_endpoints.join(", ")} gateway endpoint free, and ${dataNote}: **${money(vpc.total)}** a month. The fixed part is the price of the network, whatever the functions do:`,
    "",
    ...vpcAlternatives(topology),
  );
  lines.push("", whereTheIdleMonthGoes(r));
  if (r.failover_s !== undefined) lines.push("", `**Failover** (crash of the leader to the standby's open gate, defaults; \`npm run bench:failover\`, reports/failover.md): median ${r.failover_s.toFixed(1)} s from the leader's last renewal.`);
  lines.push(
    "",
    `**Beside the Go daemon:** two t4g.small (2 GB; the daemon's peak memory reached 0.5-1.6 GB at 64-256 workers in bench:peer) with 8 GB gp3 each, leader and standby, cost ${money(r.go_daemon_dollars_per_month)} a month whether or not anything is provisioned.`,
    "",
    "## Counts",
    "",
    "| phase | seconds | function | invocations | GB-seconds |",
    "|---|---|---|---|---|",
  );
  for (const [phase, counts] of [["provisioning", r.provisioning], ["idle", r.idle]] as const) {
    for (const [name, f] of Object.entries(counts.lambda)) lines.push(`| ${phase} | ${counts.seconds.toFixed(0)} | ${name} | ${f.invocations} | ${f.gbSeconds.toFixed(1)} |`);
  }
  lines.push("", "| phase | DynamoDB writes | DynamoDB reads | SQS requests | scheduled invocations |", "|---|---|---|---|---|");
  for (const [phase, counts] of [["provisioning", r.provisioning], ["idle", r.idle]] as const) {
    lines.push(`| ${phase} | ${counts.dynamoDb.writes} | ${counts.dynamoDb.reads} | ${counts.sqsRequests} | ${counts.scheduledInvocations} |`);
  }
  lines.push(
    "",
    "## Prices used",
    "",
    `As of ${PRICES.date}: Lambda $${PRICES.lambdaPerGbSecond} per GB-second (x86) and $${PRICES.lambdaPerMillionRequests} per million requests; DynamoDB on-demand $${PRICES.dynamoDbPerMillionWriteUnits} per million write units and $${PRICES.dynamoDbPerMillionReadUnits} per million read units; SQS standard $${PRICES.sqsPerMillionRequests} per million requests; scheduled EventBridge rules free (EventBridge Scheduler would be $1.00 per million); EC2 t4g.small $${PRICES.ec2T4gSmallPerHour} and t4g.nano $${PRICES.ec2T4gNanoPerHour} an hour, gp3 $${PRICES.ebsGp3PerGbMonth} per GB-month; NAT gateway $${PRICES.natGatewayPerHour} an hour and $${PRICES.natGatewayPerGb} per GB processed; interface endpoint $${PRICES.interfaceEndpointPerAzHour} an hour in each Availability Zone and $${PRICES.interfaceEndpointPerGb} per GB; gateway endpoints free. Free tiers are left out.`,
    "",
    "## What this does and does not say",
    "",
    "- Durations were measured on a shared machine: a busy machine makes invocations longer, so the GB-seconds, and the Lambda compute, are an upper bound; the request counts are not affected by load.",
    "- A DynamoDB write or strongly consistent read of an item under 1 KB is one unit (the admission and lease items are a few hundred bytes); a conditional write that fails its condition still costs its unit and is counted.",
    "- Not counted: CloudWatch Logs ingestion and metrics (EMF), Secrets Manager or SSM reads at a container's cold start, DynamoDB storage (kilobytes); in a VPC, TLS framing of the bytes through the endpoints, and the network that links the VPC to the brokers (peering, Transit Gateway or VPN: the site's, whatever runs in it).",
    "- The idle month is, in both deployments: the keeper's run every minute, the ticks it arms (a leader's every 10 s, a standby's one a minute), discovery and renewal every minute finding nothing, and the SQS event sources long-polling their queues (modelled as Lambda's pollers: five long-polling an idle queue, 20 s each, fewer where the mapping's maximum concurrency is lower, as an idle mapping's 15 empty receives a minute in CloudWatch show; more join while messages come).",
  );
  return `${lines.join("\n")}\n`;
}

// Run as a program only: test/unit/bench imports the arithmetic.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) runBenchmark("cost benchmark", main);
