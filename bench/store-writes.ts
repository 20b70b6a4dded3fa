/**
 * What each DynamoDB write of a provisioned host costs in CPU, in DynamoDB Local's JVM and in this
 * process (the client), and what the two ways of sending fewer requests would cost instead
 * (docs/behaviour.md §2, "Writes per host"). The writes are the product's own: its admission
 * registry and issuance ledger over the DynamoDB adapters, each host taken through admit, claim,
 * ledger record, credentials and the end of the claim. Every step runs for all the round's hosts
 * before the next, so each step's CPU is read apart: DynamoDB Local's from /proc/<pid>/stat, this
 * process's from process.cpuUsage. The alternatives are the same requests, joined on their way
 * out by a rewriting HTTP handler: the ledger record and the credentials of a host as one
 * TransactWriteItems, and the admissions of one discovery chunk (10 hosts) as one TransactWriteItems.
 * DynamoDB Local does not check signatures, so the joined request goes out with the first one's;
 * each write was still signed on its own, so the client's figure for them is an upper bound.
 *
 *   npm run bench:store-writes -- [--hosts 2000] [--rounds 3] [--report-dir reports]
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HttpRequest, HttpResponse } from "@smithy/core/transport";
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { AdmissionRegistry } from "../lib/admission/registry";
import type { HostClaim } from "../lib/admission/claim";
import { DynamoDbAdmissionStore } from "../lib/dynamodb/admission-store";
import { DynamoDbIssuanceLedger } from "../lib/dynamodb/issuance-ledger";
import type { CredentialsExpiry } from "../lib/ports/credentials";
import type { HostWork } from "../lib/ports/host-work";
import type { Issuance } from "../lib/ports/issuance-ledger";
import type { Metrics } from "../lib/ports/metrics";
import { createAdmissionTable } from "../dev/local/resources";
import { LOCAL_AWS, startDynamoDbLocal, type RunningDynamoDb } from "../dev/local/services";
import { cpuSeconds, median, procStat, round2 } from "./measure";
import { parsedOptions, reportDirOf, runBenchmark, wholeNumber } from "./command";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const SITE = "bench";
const TERM = 1;
const TABLE = "store-writes-admission";
const DAY_MS = 86_400_000;
/** As discovery admits: chunks of 10 (one SendMessageBatch each), 5 chunks at once (lib/app/leadership.ts). */
const ADMISSION_CHUNK = 10;
const ADMISSIONS_AT_ONCE = 50;
/** A provision invocation's hosts in flight: 10 workers (the default) in each of 10 containers. */
const HOSTS_AT_ONCE = 100;
const noMetrics: Metrics = { gauge() {}, count() {}, timing() {} };

const STEPS = ["admit", "claim", "ledger", "credentials", "end"] as const;
type Step = (typeof STEPS)[number];
type Alternative = "admit-chunk-transaction" | "ledger-credentials-transaction";

/** CPU per write (per host for the alternatives), in ms. */
interface Cost {
  dynamoDbLocal: number;
  client: number;
}

interface Round {
  steps: Record<Step, Cost>;
  alternatives: Record<Alternative, Cost>;
}

interface Report {
  generated: string;
  cpus: number;
  cpu_model: string;
  node: string;
  hosts_per_round: number;
  rounds: Round[];
  /** Medians over the rounds. */
  steps: Record<Step, Cost>;
  alternatives: Record<Alternative, Cost & { replaces: Cost }>;
  load_average_1m: { start: number; end: number };
}

const USAGE = `Usage: npm run bench:store-writes -- [--hosts <n>] [--rounds <n>] [--report-dir <dir>]

Takes <n> hosts (default 2000) through the product's five DynamoDB writes against DynamoDB Local,
step by step, and the two joined alternatives (a discovery chunk's admissions as one transaction;
a host's ledger record and credentials as one), <rounds> times (default 3) after a warm-up, and
prints the CPU per write of DynamoDB Local and of the client. Writes <dir>/store-writes.json and
<dir>/store-writes.md (default reports/).
`;

interface Options {
  hosts: number;
  rounds: number;
  reportDir: string;
}

function options(): Options | undefined {
  const values = parsedOptions("bench:store-writes", { hosts: { type: "string" }, rounds: { type: "string" }, "report-dir": { type: "string" }, help: { type: "boolean" } });
  if (values.help) return undefined;
  const whole = (flag: string, text: string | undefined, fallback: number) => wholeNumber("bench:store-writes", flag, text, fallback);
  return { hosts: whole("--hosts", values.hosts, 2000), rounds: whole("--rounds", values.rounds, 3), reportDir: reportDirOf(values["report-dir"]) };
}

/** Runs `work` over `items`, `atOnce` at a time, and returns the CPU it cost per item, in ms. */
async function measured<T>(dynamoDb: RunningDynamoDb, items: readonly T[], atOnce: number, work: (item: T) => Promise<unknown>): Promise<Cost> {
  const jvmBefore = jvmCpuMs(dynamoDb);
  const clientBefore = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: atOnce }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
  const client = process.cpuUsage(clientBefore);
  return { dynamoDbLocal: round3((jvmCpuMs(dynamoDb) - jvmBefore) / items.length), client: round3((client.user + client.system) / 1000 / items.length) };
}

function jvmCpuMs(dynamoDb: RunningDynamoDb): number {
  if (dynamoDb.pid === undefined) throw new Error("DynamoDB Local has no process id to read its CPU from");
  return cpuSeconds(procStat(dynamoDb.pid)) * 1000;
}

const round3 = (value: number) => Math.round(value * 1000) / 1000;

type Send = (request: HttpRequest) => Promise<{ response: HttpResponse }>;

/** A write held back to go out inside a transaction: its TransactItems entry and its caller. */
interface Held {
  entry: Record<string, unknown>;
  answer: (response: { response: HttpResponse }) => void;
  fail: (error: unknown) => void;
}

/**
 * The client's HTTP handler with a join on the way out. `as-is` sends every request; `admit-chunk`
 * holds UpdateItems until a chunk's worth (or 20 ms) and sends them as one TransactWriteItems;
 * `ledger-credentials` holds a host's ledger PutItem until its credentials UpdateItem comes and
 * sends the two as one. A held write is answered as DynamoDB answers an applied write with no
 * ReturnValues; a refused transaction fails every write in it, so the run stops on it.
 */
class JoiningHandler {
  mode: "as-is" | "admit-chunk" | "ledger-credentials" = "as-is";
  private chunk: Held[] = [];
  private chunkTimer: NodeJS.Timeout | undefined;
  private readonly waitingByHost = new Map<string, { held: Held; request: HttpRequest }>();

  constructor(private readonly send: Send) {}

  handle(request: HttpRequest): Promise<{ response: HttpResponse }> {
    const operation = String(request.headers["x-amz-target"]).split(".")[1];
    if (this.mode === "as-is" || (operation !== "UpdateItem" && operation !== "PutItem")) return this.send(request);
    return new Promise((answer, fail) => {
      const input = JSON.parse(String(request.body)) as Record<string, unknown> & { ReturnValues?: unknown };
      const { ReturnValues: _none, ...entry } = input;
      const held: Held = { entry: { [operation === "PutItem" ? "Put" : "Update"]: entry }, answer, fail };
      if (this.mode === "admit-chunk") this.holdAdmission(request, held);
      else this.holdLedgerOrCredentials(request, operation, input, held);
    });
  }

  private holdAdmission(request: HttpRequest, held: Held): void {
    this.chunk.push(held);
    if (this.chunk.length >= ADMISSION_CHUNK) return this.flushChunk(request);
    this.chunkTimer ??= setTimeout(() => this.flushChunk(request), 20);
  }

  private flushChunk(request: HttpRequest): void {
    clearTimeout(this.chunkTimer);
    this.chunkTimer = undefined;
    const writes = this.chunk;
    this.chunk = [];
    void this.transact(request, writes);
  }

  /** A host's ledger PutItem and credentials UpdateItem, whichever comes first waiting for the other. */
  private holdLedgerOrCredentials(request: HttpRequest, operation: string, input: Record<string, unknown>, held: Held): void {
    const host = operation === "PutItem" ? stringAttribute(input.Item, "host") : stringAttribute(input.Key, "identity");
    const other = this.waitingByHost.get(host);
    if (!other) {
      this.waitingByHost.set(host, { held, request });
      return;
    }
    this.waitingByHost.delete(host);
    void this.transact(request, [other.held, held]);
  }

  private async transact(like: HttpRequest, writes: Held[]): Promise<void> {
    const body = JSON.stringify({ TransactItems: writes.map((write) => write.entry) });
    const headers = { ...like.headers, "x-amz-target": "DynamoDB_20120810.TransactWriteItems", "content-length": String(Buffer.byteLength(body)) };
    try {
      const { response } = await this.send(new HttpRequest({ ...like, headers, body }));
      const text = await new Response(Readable.toWeb(response.body as Readable) as ReadableStream).text();
      if (response.statusCode !== 200) throw new Error(`TransactWriteItems of ${writes.length} answered HTTP ${response.statusCode}: ${text}`);
      for (const write of writes) write.answer({ response: new HttpResponse({ statusCode: 200, headers: { "content-type": "application/x-amz-json-1.0" }, body: Readable.from([Buffer.from("{}")]) }) });
    } catch (error) {
      for (const write of writes) write.fail(error);
    }
  }
}

function stringAttribute(item: unknown, name: string): string {
  const value = (item as Record<string, { S?: string }> | undefined)?.[name]?.S;
  if (value === undefined) throw new Error(`the write has no string attribute ${name}`);
  return value;
}

/** A DynamoDB client whose requests go through a JoiningHandler. */
function joiningClient(endpoint: string): { client: DynamoDBClient; handler: JoiningHandler } {
  const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint });
  const inner = client.config.requestHandler as unknown as { handle: Send };
  const send: Send = inner.handle.bind(inner);
  const handler = new JoiningHandler(send);
  inner.handle = (request) => handler.handle(request);
  return { client, handler };
}

interface Parts {
  dynamoDb: RunningDynamoDb;
  handler: JoiningHandler;
  registry: AdmissionRegistry;
  ledger: DynamoDbIssuanceLedger;
}

/** What a host is issued: a server JWT and a certificate, as the engine records them. */
function issued(identity: string, now: number): { issuance: Issuance; credentials: CredentialsExpiry } {
  const credentialId = `jti-${identity}`;
  const expiresAt = now + 30 * DAY_MS;
  const keySha256 = "5e".repeat(32);
  const issuance: Issuance = {
    site: SITE,
    identity,
    kind: "provision",
    term: TERM,
    deploymentId: "bench-deployment",
    expiresAt: now + 90 * DAY_MS,
    credentialId,
    issuedAt: now,
    verdictSha256: "ab".repeat(32),
    certificate: { serial: "0A1B2C3D4E5F", sha256: Array.from({ length: 32 }, () => "AB").join(":"), issuer: "CN=Choria Bench CA", subject: `CN=${identity}`, notAfter: expiresAt, keySha256 },
    serverJwt: { jti: credentialId, expiresAt, issuer: "Choria Provisioner", keySha256 },
  };
  return { issuance, credentials: { expiresAt, kind: "server_jwt", issuedAt: now, credentialId } };
}

/** One round: `count` hosts through the five writes step by step, then `count` others through the joined alternatives. */
async function oneRound(parts: Parts, count: number, prefix: string): Promise<Round> {
  const product = await hostsThrough(parts, names(`${prefix}-p`, count), { admit: "as-is", ledgerAndCredentials: "as-is" });
  const joined = await hostsThrough(parts, names(`${prefix}-j`, count), { admit: "admit-chunk", ledgerAndCredentials: "ledger-credentials" });
  return {
    steps: product,
    alternatives: { "admit-chunk-transaction": joined.admit, "ledger-credentials-transaction": joined.ledger },
  };
}

const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}.bench.example`);

/**
 * Takes `hosts` through admit, claim, ledger, credentials and end, each step for all of them before
 * the next. With the ledger and credentials joined, the ledger step's figure is the pair's.
 */
async function hostsThrough(parts: Parts, hosts: readonly string[], joins: { admit: JoiningHandler["mode"]; ledgerAndCredentials: JoiningHandler["mode"] }): Promise<Record<Step, Cost>> {
  const { dynamoDb, handler, registry, ledger } = parts;
  const works = new Map<string, HostWork>();
  const claims = new Map<string, HostClaim>();
  const now = Date.now();
  const issues = new Map(hosts.map((host) => [host, issued(host, now)]));
  const of = <T>(map: ReadonlyMap<string, T>, host: string): T => map.get(host) ?? failed(`${host} has no earlier step`);
  handler.mode = joins.admit;
  const admit = await measured(dynamoDb, hosts, ADMISSIONS_AT_ONCE, async (host) => works.set(host, (await registry.admit(host, "discovery", TERM)) ?? failed(`${host} was not admitted`)));
  handler.mode = "as-is";
  const claim = await measured(dynamoDb, hosts, HOSTS_AT_ONCE, async (host) => {
    const outcome = await registry.begin(of(works, host), TERM);
    claims.set(host, outcome.status === "claimed" ? outcome.claim : failed(`${host} was not claimed: ${outcome.status}`));
  });
  const recordCredentials = async (host: string) => (await registry.recordCredentials(of(claims, host), of(issues, host).credentials)) || failed(`${host}: credentials not recorded`);
  let ledgerStep: Cost;
  let credentials: Cost;
  if (joins.ledgerAndCredentials === "as-is") {
    ledgerStep = await measured(dynamoDb, hosts, HOSTS_AT_ONCE, (host) => ledger.record(of(issues, host).issuance));
    credentials = await measured(dynamoDb, hosts, HOSTS_AT_ONCE, recordCredentials);
  } else {
    handler.mode = joins.ledgerAndCredentials;
    ledgerStep = await measured(dynamoDb, hosts, HOSTS_AT_ONCE, (host) => Promise.all([ledger.record(of(issues, host).issuance), recordCredentials(host)]));
    handler.mode = "as-is";
    credentials = { dynamoDbLocal: 0, client: 0 };
  }
  const end = await measured(dynamoDb, hosts, HOSTS_AT_ONCE, (host) => registry.complete(of(claims, host), "provisioned", of(issues, host).credentials));
  return { admit, claim, ledger: ledgerStep, credentials, end };
}

function failed(why: string): never {
  throw new Error(`bench:store-writes: ${why}`);
}

/** The median over rounds of each figure. */
function medianCost(costs: readonly Cost[]): Cost {
  return {
    dynamoDbLocal: round3(median(costs.map((cost) => cost.dynamoDbLocal)) ?? Number.NaN),
    client: round3(median(costs.map((cost) => cost.client)) ?? Number.NaN),
  };
}

const sum = (...costs: Cost[]): Cost => ({
  dynamoDbLocal: round3(costs.reduce((total, cost) => total + cost.dynamoDbLocal, 0)),
  client: round3(costs.reduce((total, cost) => total + cost.client, 0)),
});

function summarise(rounds: readonly Round[]): Pick<Report, "steps" | "alternatives"> {
  const steps = Object.fromEntries(STEPS.map((step) => [step, medianCost(rounds.map((r) => r.steps[step]))])) as Record<Step, Cost>;
  const alternative = (name: Alternative) => medianCost(rounds.map((r) => r.alternatives[name]));
  return {
    steps,
    alternatives: {
      "admit-chunk-transaction": { ...alternative("admit-chunk-transaction"), replaces: steps.admit },
      "ledger-credentials-transaction": { ...alternative("ledger-credentials-transaction"), replaces: sum(steps.ledger, steps.credentials) },
    },
  };
}

const WRITE_OF: Record<Step, string> = {
  admit: "admit (UpdateItem)",
  claim: "claim (UpdateItem, ALL_NEW)",
  ledger: "ledger record (PutItem, indexed)",
  credentials: "credentials on the claim (UpdateItem)",
  end: "end of the claim (UpdateItem)",
};

function markdown(report: Report): string {
  const both = (cost: Cost) => `${cost.dynamoDbLocal} | ${cost.client} | ${round3(cost.dynamoDbLocal + cost.client)}`;
  const total = sum(...STEPS.map((step) => report.steps[step]));
  const chunk = report.alternatives["admit-chunk-transaction"];
  const pair = report.alternatives["ledger-credentials-transaction"];
  return [
    "# CPU of a provisioned host's DynamoDB writes",
    "",
    `Generated ${report.generated} by \`npm run bench:store-writes\` on ${report.cpus} CPU(s) (${report.cpu_model}), Node ${report.node}: ${report.hosts_per_round} hosts a round, medians of ${report.rounds.length} rounds after a warm-up; load ${report.load_average_1m.start} at the start, ${report.load_average_1m.end} at the end.`,
    "",
    "CPU in ms per write: DynamoDB Local's JVM, and the client (this process: the product's registry and ledger over its DynamoDB adapters).",
    "",
    "| write | DynamoDB Local | client | both |",
    "|---|---|---|---|",
    ...STEPS.map((step) => `| ${WRITE_OF[step]} | ${both(report.steps[step])} |`),
    `| all five, per host | ${both(total)} |`,
    "",
    "Sending fewer requests instead, per host (the client's figure is an upper bound: each joined write was still signed on its own):",
    "",
    "| alternative | DynamoDB Local | client | both | instead of (both) |",
    "|---|---|---|---|---|",
    `| a discovery chunk's ${ADMISSION_CHUNK} admissions as one TransactWriteItems | ${both(chunk)} | ${round3(chunk.replaces.dynamoDbLocal + chunk.replaces.client)} (admit) |`,
    `| a host's ledger record and credentials as one TransactWriteItems | ${both(pair)} | ${round3(pair.replaces.dynamoDbLocal + pair.replaces.client)} (ledger + credentials) |`,
    "",
    "On AWS a transaction's items cost twice the write units of the same writes sent alone.",
    "",
  ].join("\n");
}

async function main(): Promise<void> {
  const chosen = options();
  if (!chosen) {
    process.stdout.write(USAGE);
    return;
  }
  const loadStart = loadavg()[0] ?? 0;
  const dynamoDb = await startDynamoDbLocal();
  try {
    const { client, handler } = joiningClient(dynamoDb.url);
    await createAdmissionTable(client, TABLE);
    const registry = new AdmissionRegistry({ site: SITE, intervalMs: 60_000 }, { store: new DynamoDbAdmissionStore({ client, tableName: TABLE }), metrics: noMetrics });
    const parts: Parts = { dynamoDb, handler, registry, ledger: new DynamoDbIssuanceLedger({ client, tableName: TABLE }) };
    await oneRound(parts, Math.min(chosen.hosts, 500), "warm-up");
    const rounds: Round[] = [];
    for (let i = 1; i <= chosen.rounds; i++) {
      rounds.push(await oneRound(parts, chosen.hosts, `round-${i}`));
      process.stdout.write(`round ${i}: ${JSON.stringify(rounds[rounds.length - 1])}\n`);
    }
    const report: Report = {
      generated: new Date().toISOString(),
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model.trim() ?? "unknown",
      node: process.version,
      hosts_per_round: chosen.hosts,
      rounds,
      ...summarise(rounds),
      load_average_1m: { start: round2(loadStart), end: round2(loadavg()[0] ?? 0) },
    };
    await mkdir(chosen.reportDir, { recursive: true });
    await writeFile(join(chosen.reportDir, "store-writes.json"), `${JSON.stringify(report, null, 2)}\n`);
    const text = markdown(report);
    await writeFile(join(chosen.reportDir, "store-writes.md"), text);
    process.stdout.write(`\n${text}\nwrote ${join(chosen.reportDir, "store-writes.json")} and store-writes.md\n`);
  } finally {
    await dynamoDb.stop();
  }
}

runBenchmark("store-writes benchmark", main);
