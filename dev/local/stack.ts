/**
 * The local stack: everything `npm run local`, the end-to-end tests and the pipeline benchmark run
 * on. It starts nats-server, DynamoDB Local and fauxqs on free loopback ports, creates the tables,
 * queues (with DLQ redrive) and the lifecycle stream, starts a simulated fleet, builds one App per
 * deployment and binds the real handlers (`makeHandler(() => app)` from handlers/*.ts) to emulated
 * EventBridge schedules and SQS event source mappings (lambda-runtime.ts).
 *
 * Deployments are separate, as `sls deploy` builds them: each has its own queues, its own function
 * wiring and its own clients; they share only what production shares, the site's lease table (the
 * `leaseTable` param), the site's one admission table (the `admissionTable` param: the admission
 * registry and renewal's state, so a standby that takes over knows every host its predecessor
 * provisioned and when its credentials expire) and the broker with its lifecycle stream and the
 * site's one durable consumer. Both tables belong to the first deployment. The first deployment
 * starts first and the others only once it leads, as a standby is deployed into a site whose lease
 * is already held. The Apps reach DynamoDB and SQS through counting
 * proxies so the requests they make can be reported without touching the App; `countingProxies:
 * false` connects them directly (bench:peer, where every proxy hop would be charged to the
 * provisioner's process: on AWS no such hop exists).
 */
// First: before any function module builds its Powertools instances (see quiet-powertools.ts).
import "./quiet-powertools";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { stringify as toYaml } from "yaml";
import { connect as connectNats } from "nats";
import { APP_DEFAULTS, appSettingsFromEnv } from "../../lib/aws/settings";
import { defaultConsumerName } from "../../lib/nats/lifecycle-event-source";
import { createApp, type App, type AppOverrides } from "./create-app";
import { lifecycleSubject } from "../../lib/choria/lifecycle";
import { ed25519SigningKey, generateEd25519Seed } from "../../test/support/choria-node/keys";
import { encodeHex } from "../../lib/crypto/encoding";
import type { SigningKey } from "../../lib/crypto/keys";
import { decodeHelperResponse } from "../../lib/helper/codec";
import { createPowertoolsMetrics } from "../../lib/aws/powertools-metrics";
import { InMemoryMetrics } from "../../test/support/in-memory-metrics";
import { EXTRA_METRIC } from "../../lib/ports/metric-names";
import { silentLogger, type Logger } from "../../lib/ports/logger";
import type { HelperRunner } from "../../lib/ports/helper";
import type { Metrics } from "../../lib/ports/metrics";
import { ProvisionerError } from "../../lib/errors";
import { startFleet, type Fleet, type FleetOptions } from "../simulator";
import { readDeployedDefaults, type DeployedFunction, type QueueDefaults } from "./deployed-defaults";
import {
  InvocationLedger,
  ScheduleSource,
  SqsEventSource,
  type Delivery,
  type EventSource,
  type FunctionSpec,
  type ScheduleHandler,
  type SqsHandler,
} from "./lambda-runtime";
import { mergedTraffic, startCountingProxy, type CountingProxy, type ObservedReply, type ObservedRequest, type TrafficCounts } from "./request-counter";
import { createLifecycleStream, createProvisionerTables, createQueueWithDeadLetter, LIFECYCLE_STREAM, LOCAL_STAGE, stageResourceNames } from "./resources";
import { exportLines } from "./shell";
import { LOCAL_AWS, startDynamoDbLocal, startNats, startSqs, type RunningNats, type RunningSqs } from "./services";

const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
export const HELPERS = {
  node: `node ${join(REPO_ROOT, "examples/helpers/provision-helper.mjs")}`,
  bash: join(REPO_ROOT, "examples/helpers/provision-helper.sh"),
} as const;

export type FeatureName = "jwt" | "ed25519" | "pki";
export type HelperChoice = keyof typeof HELPERS | "inline" | { command: string };

/** Timings and sizes of the emulated functions, schedules and queues. `fast` shortens them for demos and tests. */
export interface StackTimings {
  discoverRateMs: number;
  discoverTimeoutMs: number;
  keeperRateMs: number;
  keeperTimeoutMs: number;
  lifecycleTimeoutMs: number;
  provisionTimeoutMs: number;
  /** `renew`'s schedule and timeout; it is scheduled only where renewal has a main broker to reach (`renew.broker_urls`). */
  renewRateMs: number;
  renewTimeoutMs: number;
  hostWork: QueueDefaults;
  lifecycle: QueueDefaults;
  retryBaseDelaySeconds: number;
  retryMaxDelaySeconds: number;
  lease: { duration: string; renew_interval: string; skew_bound: string };
}

const DEPLOYED = readDeployedDefaults();

/**
 * What AWS runs with the serverless.yml defaults, read from serverless.yml (dev/local/deployed-defaults.ts):
 * its function timeouts, queue visibility and redrive, batch sizes and concurrency; one-minute
 * schedules (`interval`'s default is the discover schedule), the 30 s / 10 s / 5 s lease.
 */
export const DEFAULT_TIMINGS: StackTimings = {
  discoverRateMs: 60_000,
  discoverTimeoutMs: DEPLOYED.functions.discover.timeoutMs,
  keeperRateMs: DEPLOYED.functions.leaseKeeper.rateMs ?? 60_000,
  keeperTimeoutMs: DEPLOYED.functions.leaseKeeper.timeoutMs,
  lifecycleTimeoutMs: DEPLOYED.functions.lifecycle.timeoutMs,
  provisionTimeoutMs: DEPLOYED.functions.provision.timeoutMs,
  renewRateMs: DEPLOYED.functions.renew.rateMs ?? 60_000,
  renewTimeoutMs: DEPLOYED.functions.renew.timeoutMs,
  hostWork: DEPLOYED.hostWork,
  lifecycle: DEPLOYED.lifecycle,
  retryBaseDelaySeconds: APP_DEFAULTS.retryBaseDelaySeconds,
  retryMaxDelaySeconds: APP_DEFAULTS.retryMaxDelaySeconds,
  lease: { duration: "30s", renew_interval: "10s", skew_bound: "5s" },
};

/**
 * `--fast`: a documented deviation from AWS. EventBridge cannot fire more often than once a minute;
 * here discovery runs every 15 s, keeper and bridge invocations last ~10 s and retries come back
 * after 2-10 s. The lease is 30 s / 2 s / 1 s: the pause gate only opens for an RPC attempt (up to
 * 2 s discovery + 20 s choria_provision timeout = 22 s) that fits in the validity left after a
 * keep, so a much shorter lease cannot provision at all; a failover then takes ~61-63 s (lease,
 * skew and the 30 s rpc_ttl delivery horizon after the lease was last kept). Function
 * timeouts are shorter (discover 60 s, provision 60 s), the queues' visibility follows them (host
 * work 70 s, lifecycle 60 s), renew runs every 10 s (its rate is per minute in its own state, so
 * running more often only sends sooner within it), poison work reaches a DLQ sooner (after 5 host-work, 3 lifecycle
 * receives), and lifecycle batches are 10 events, 5 concurrent provision invocations.
 */
const FAST_TIMINGS: StackTimings = {
  discoverRateMs: 15_000,
  discoverTimeoutMs: 60_000,
  keeperRateMs: 10_000,
  keeperTimeoutMs: 12_000,
  lifecycleTimeoutMs: 30_000,
  provisionTimeoutMs: 60_000,
  renewRateMs: 10_000,
  renewTimeoutMs: 60_000,
  hostWork: { visibilitySeconds: 70, maxReceiveCount: 5, batchSize: 10, maxConcurrency: 5 },
  lifecycle: { visibilitySeconds: 60, maxReceiveCount: 3, batchSize: 10, maxConcurrency: 2 },
  retryBaseDelaySeconds: 2,
  retryMaxDelaySeconds: 10,
  lease: { duration: "30s", renew_interval: "2s", skew_bound: "1s" },
};

export interface LocalStackOptions {
  /** Simulated nodes; default 100. */
  nodes?: number;
  /** Default jwt + ed25519. */
  features?: FeatureName[];
  /** Default the node example helper. */
  helper?: HelperChoice;
  /** Deployment ids; the first is started first. Default ["primary"]. */
  deployments?: string[];
  fast?: boolean;
  /** Overrides of single timings (after `fast` picked the base). */
  timings?: Partial<StackTimings>;
  site?: string;
  /** `workers`: hosts one provision invocation works on at once. Default 10. */
  workers?: number;
  /** Host-work records per provision invocation. Default the timings' (`hostWork.batchSize`). */
  batchSize?: number;
  /** Concurrent provision invocations per deployment (maximumConcurrency). Default the timings'. */
  maxConcurrency?: number;
  /** Host-work receives before the DLQ. Default the timings'. */
  maxReceiveCount?: number;
  /** Simulated node restart delay; default 2 s as the Go server. */
  restartDelayMs?: number;
  fleet?: Partial<Omit<FleetOptions, "natsUrl" | "count" | "provisioningSigner" | "token">>;
  /** Give each deployment its own `callerid`, so fleet.record shows which deployment sent each request (tests only: it breaks lock continuity across a failover). */
  distinctCallerIds?: boolean;
  /** Extra App overrides per deployment (tests: helper wrappers). */
  overrides?: (deployment: string) => Partial<AppOverrides>;
  /** Logger for the Apps and the runtime; default silent. */
  logger?: Logger;
  /**
   * Put the counting proxies between the Apps (and the event sources) and DynamoDB / SQS. Default
   * true. Without them nothing is counted (`traffic` throws), `observe` / `observeReply` cannot be
   * given and a deployment cannot be `kill()`ed (the proxies are what holds its requests).
   */
  countingProxies?: boolean;
  /** Called with every DynamoDB / SQS request the Apps make (bench: admission times). */
  observe?: (request: ObservedRequest) => void;
  /** Called with every reply to those requests, with its round-trip time (bench: DynamoDB round trips). */
  observeReply?: (reply: ObservedReply) => void;
  /** Called with every batch an emulated SQS event source delivered (bench: time in the queue). */
  onDelivery?: (delivery: Delivery) => void;
  /** Poll wait of the emulated event sources (Lambda uses 20 s; shorter stops faster). Default 2 s. */
  waitTimeSeconds?: number;
  /** Schedule `renew` even without a main broker, as AWS does (each run then answers `not-configured`): the cost bench counts it. */
  renewEverywhere?: boolean;
  /** Use this DynamoDB (e.g. the test run's shared DynamoDB Local) instead of starting one; tables get unique names. */
  dynamoDbEndpoint?: string;
  /** Extra provisioner configuration keys per deployment (merged over the stack's). */
  config?: (deployment: string) => Record<string, unknown>;
  /** Use this broker instead of starting one, and leave it running (bench: fleet and peers in other processes). */
  nats?: RunningNats;
  /**
   * The CA of a TLS broker given as `nats` (e.g. the real fleet's provisioning broker): the Apps
   * connect with `choria_insecure: false` and `tls.ca`. Pair it with `nodes: 0` when real nodes are the fleet.
   */
  natsCaFile?: string;
  /**
   * Create the lifecycle stream on the broker (default true). The real fleet turns it off: its
   * go-choria broker makes its own (CHORIA_EVENTS, in the choria account).
   */
  lifecycleStream?: boolean;
  /** Use this SQS instead of starting fauxqs in this process, and leave it running (bench: CPU of the emulator kept out). */
  sqs?: RunningSqs;
  /** Key that signs the simulated nodes' provisioning JWT; default a fresh one (bench: a fleet in another process shares it). */
  provisioningSigner?: SigningKey;
}

interface FunctionNames {
  discover: string;
  leaseKeeper: string;
  lifecycle: string;
  provision: string;
  renew: string;
}

interface LocalDeployment {
  readonly id: string;
  /** The site's lease and admission tables, the same for every deployment (the first one's). */
  readonly tables: { lease: string; admission: string };
  readonly app: App;
  readonly metrics: InMemoryMetrics;
  readonly functions: FunctionNames;
  readonly queues: { hostWork: string; hostWorkDlq: string; lifecycle: string; lifecycleDlq: string };
  /** The environment the handlers would get on AWS (also what `sls invoke local` needs). */
  readonly env: Record<string, string>;
  readonly sources: EventSource[];
  readonly crashed: boolean;
  /**
   * Simulates a crashed deployment: schedules and pollers stop, running invocations run out of
   * time, and nothing it sends reaches DynamoDB or SQS any more (its proxies hold every request),
   * so code that does not re-check its deadline (a keeper loop) cannot keep the lease either.
   */
  kill(): void;
}

export interface LeaseView {
  holder: string;
  term: number;
  expiresAt: number;
}

export interface DeadLetter {
  deployment: string;
  identity: string | undefined;
  reason: string | undefined;
  body: string;
}

/** Provisioning-mode startup events followed from the nodes to the deployments' lifecycle functions. */
export interface LifecycleEventCount {
  /** Published by the simulated nodes on choria.lifecycle.event.startup.provision_mode_server. */
  published: number;
  /** Handled by a lifecycle function while its deployment led (admitted, or already admitted by a discovery), per deployment. */
  reachedLeader: Record<string, number>;
  /** Handled by a lifecycle function while its deployment was paused (and so dropped). */
  droppedPaused: number;
  /** Sent to a lifecycle DLQ because SQS refused them. */
  deadLettered: number;
  /** Still in the stream for the site's consumer (not yet delivered, or delivered and not acknowledged). */
  pendingInStream: number;
  /** None dropped, dead-lettered or pending, and at least as many reached a leader as were published. */
  noneLost: boolean;
}

export interface LocalStack {
  readonly nats: RunningNats;
  readonly dynamoDb: { readonly url: string; readonly pid: number | undefined };
  readonly sqs: RunningSqs;
  readonly fleet: Fleet;
  readonly deployments: LocalDeployment[];
  readonly ledger: InvocationLedger;
  /**
   * Requests counted by proxies: the Apps' DynamoDB and SQS traffic (all deployments), and the
   * emulated event sources' SQS traffic. Throws TrafficNotCountedError without `countingProxies`.
   */
  readonly traffic: { dynamoDb: TrafficCounts; sqsApp: TrafficCounts; sqsEventSources: CountingProxy };
  readonly site: string;
  /** The site's lease and admission tables, which every deployment shares. */
  readonly tables: { lease: string; admission: string };
  readonly timings: StackTimings;
  readonly workDir: string;
  /**
   * Starts the first deployment's schedules and pollers and, once it holds the lease, the others'
   * (they then start paused). `started` resolves when every deployment runs.
   */
  start(): void;
  readonly started: Promise<void>;
  /** Startup events counted end to end; see LifecycleEventCount. */
  lifecycleEvents(): Promise<LifecycleEventCount>;
  lease(): Promise<LeaseView | undefined>;
  /** Every dead-lettered host-work message (read without consuming it for long). */
  deadLetters(): Promise<DeadLetter[]>;
  /** Stops what the stack started, the last started first; `onStep` hears each step worth naming (the fleet, each deployment, each service) as it begins. */
  stop(onStep?: (what: string) => void): Promise<void>;
}

/** One thing `stop` undoes; `what` names it to the person waiting, when it is worth naming. */
interface CleanupStep {
  what?: string;
  run: () => Promise<unknown>;
}

/** A stack started with `countingProxies: false` was asked for what only the proxies can do. */
export class TrafficNotCountedError extends ProvisionerError {
  constructor(what: string) {
    super(`${what} needs the counting proxies; this stack was started with countingProxies: false`);
  }
}

/** The provisioning token (`cht`) the local fleet's JWT carries and the provisioner sends. */
export const LOCAL_PROVISIONING_TOKEN = "local-provisioning-token";
const TOKEN = LOCAL_PROVISIONING_TOKEN;

export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const logger = options.logger ?? silentLogger;
  const timings: StackTimings = { ...(options.fast ? FAST_TIMINGS : DEFAULT_TIMINGS), ...options.timings };
  const site = options.site ?? "local";
  const cleanup = new CleanupSteps(logger);

  const counting = options.countingProxies ?? true;
  if (!counting && (options.observe || options.observeReply)) throw new TrafficNotCountedError("observe / observeReply");
  try {
    const workDir = await mkdtemp(join(tmpdir(), "choria-local-"));
    cleanup.push({ what: "the work dir", run: () => rm(workDir, { recursive: true, force: true }) });
    const services = await startServices(options, cleanup);
    const { nats, sqs, dynamoDbUrl } = services;
    const traffic = await startEventSourceCounting(counting, sqs.url, cleanup);

    const dynamoClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamoDbUrl });
    const sqsClient = new SQSClient({ ...LOCAL_AWS, endpoint: traffic.sqsEventSources?.url ?? sqs.url });
    cleanup.push({
      run: async () => {
        dynamoClient.destroy();
        sqsClient.destroy();
      },
    });
    const tables = await createSiteTables(dynamoClient, site, options.dynamoDbEndpoint);
    if (options.lifecycleStream ?? true) await createLifecycleStream(nats.url, options.natsCaFile === undefined ? undefined : { ca: await readFile(options.natsCaFile, "utf8") });

    const keys = await writeKeyMaterial(workDir, options.provisioningSigner);
    const ledger = new InvocationLedger();
    const shared: SharedDeploymentInput = {
      site,
      options,
      timings,
      features: new Set<FeatureName>(options.features ?? ["jwt", "ed25519"]),
      natsUrl: nats.url,
      sqs,
      sqsClient,
      tables,
      ledger,
      logger,
      ...keys.files,
      workDir,
    };
    const deployments = await startDeployments(options.deployments ?? ["primary"], shared, dynamoDbUrl, traffic, cleanup);

    const fleet = await startFleet({
      natsUrl: nats.url,
      count: options.nodes ?? 100,
      provisioningSigner: keys.provisioningSigner,
      token: TOKEN,
      restartDelayMs: options.restartDelayMs ?? 2_000,
      recordDiscovery: false,
      ...options.fleet,
    });
    cleanup.push({ what: `the fleet (${fleet.identities.length} nodes)`, run: () => fleet.stop() });
    return localStackHandle({ services, fleet, deployments, ledger, counted: traffic.counted, site, tables, timings, workDir, dynamoClient, sqsClient }, cleanup);
  } catch (error) {
    await cleanup.runAll();
    throw error;
  }
}

/** What `stop` undoes, kept in the order it was started. */
class CleanupSteps {
  private readonly steps: CleanupStep[] = [];

  constructor(private readonly logger: Logger) {}

  push(...steps: CleanupStep[]): void {
    this.steps.push(...steps);
  }

  /** Runs every step, the last started first; a step that fails is logged and the others still run. */
  async runAll(onStep?: (what: string) => void): Promise<void> {
    for (const step of this.steps.reverse()) {
      if (step.what !== undefined) onStep?.(step.what);
      await step.run().catch((error) => this.logger.warn("cleanup step failed", { error: String(error) }));
    }
    this.steps.length = 0;
  }
}

interface StackServices {
  nats: RunningNats;
  /** Undefined when the caller gave `dynamoDbEndpoint`. */
  dynamoDb: Awaited<ReturnType<typeof startDynamoDbLocal>> | undefined;
  dynamoDbUrl: string;
  sqs: RunningSqs;
}

/** Starts the services the caller did not give; `cleanup` stops those. */
async function startServices(options: LocalStackOptions, cleanup: CleanupSteps): Promise<StackServices> {
  const external = options.dynamoDbEndpoint;
  // Settled one by one, so the services that did start are stopped when another one fails.
  const services = await Promise.allSettled([
    options.nats ?? startNats(),
    external === undefined ? startDynamoDbLocal() : Promise.resolve(undefined),
    options.sqs ?? startSqs(),
  ]);
  // A broker or SQS the caller gave is the caller's to stop.
  const given: unknown[] = [options.nats, undefined, options.sqs];
  const serviceNames = ["nats-server", "DynamoDB Local", "fauxqs"];
  services.forEach((service, index) => {
    if (service.status === "fulfilled" && service.value && service.value !== given[index]) {
      cleanup.push({ what: serviceNames[index] as string, run: () => service.value!.stop() });
    }
  });
  const failed = services.find((service): service is PromiseRejectedResult => service.status === "rejected");
  if (failed) throw failed.reason;
  const [nats, dynamoDb, sqs] = services.map((service) => (service as PromiseFulfilledResult<unknown>).value) as [
    RunningNats,
    Awaited<ReturnType<typeof startDynamoDbLocal>> | undefined,
    RunningSqs,
  ];
  return { nats, dynamoDb, dynamoDbUrl: dynamoDb?.url ?? (external as string), sqs };
}

/**
 * The counting proxies, when `counting`: the event sources' one in front of SQS, started here, and
 * each App's pair, added to `appProxies` as its deployment starts. Undefined `counted` without them.
 */
interface TrafficCounting {
  counting: boolean;
  appProxies: AppProxies[];
  sqsEventSources: CountingProxy | undefined;
  counted: LocalStack["traffic"] | undefined;
}

async function startEventSourceCounting(counting: boolean, sqsUrl: string, cleanup: CleanupSteps): Promise<TrafficCounting> {
  const appProxies: AppProxies[] = [];
  const sqsEventSources = counting ? await startCountingProxy({ target: sqsUrl }) : undefined;
  if (sqsEventSources) cleanup.push({ run: () => sqsEventSources.stop() });
  const counted = sqsEventSources && {
    dynamoDb: mergedTraffic(() => appProxies.map((proxies) => proxies.dynamoDb)),
    sqsApp: mergedTraffic(() => appProxies.map((proxies) => proxies.sqs)),
    sqsEventSources,
  };
  return { counting, appProxies, sqsEventSources, counted };
}

/** Creates the site's lease and admission tables; `external`: the caller's DynamoDB, where the names get a unique suffix. */
async function createSiteTables(dynamoClient: DynamoDBClient, site: string, external: string | undefined): Promise<{ lease: string; admission: string }> {
  // Its own DynamoDB: the names serverless.yml gives stage "local", so `--keep-running` and
  // scripts/sls-local.sh (sls invoke local --stage local) meet the same tables. The first
  // deployment owns them; the others name them, as the `leaseTable` and `admissionTable` params do.
  const localNames = stageResourceNames(LOCAL_STAGE);
  const unique = `${site}-${randomUUID().slice(0, 8)}`;
  const tables = {
    lease: external === undefined ? localNames.leaseTable : `${unique}-lease`,
    admission: external === undefined ? localNames.admissionTable : `${unique}-admission`,
  };
  await createProvisionerTables(dynamoClient, tables);
  return tables;
}

/** Key material made fresh for every run: the provisioning JWT signer (unless given) and the server JWT signing key. */
async function writeKeyMaterial(workDir: string, given: SigningKey | undefined) {
  const provisioningSigner = given ?? ed25519SigningKey(generateEd25519Seed());
  const signerFile = join(workDir, "provisioning-signer.pub");
  const signingKeyFile = join(workDir, "server-jwt-signing.seed");
  await writeFile(signerFile, provisioningSigner.alg === "EdDSA" ? provisioningSigner.publicKeyHex : "");
  await writeFile(signingKeyFile, encodeHex(generateEd25519Seed()), { mode: 0o600 });
  return { provisioningSigner, files: { signerFile, signingKeyFile } };
}

/** What every deployment of the stack is started with. */
type SharedDeploymentInput = Omit<DeploymentInput, "id" | "peers" | "endpoints" | "proxies">;

/** Starts the deployments one after the other, each with its own counting proxies when the stack counts. */
async function startDeployments(
  deploymentIds: string[],
  shared: SharedDeploymentInput,
  dynamoDbUrl: string,
  traffic: TrafficCounting,
  cleanup: CleanupSteps,
): Promise<LocalDeployment[]> {
  const { options, sqs } = shared;
  const observe = { ...(options.observe ? { observe: options.observe } : {}), ...(options.observeReply ? { observeReply: options.observeReply } : {}) };
  const deployments: LocalDeployment[] = [];
  for (const id of deploymentIds) {
    const proxies: AppProxies | undefined = traffic.counting
      ? { dynamoDb: await startCountingProxy({ target: dynamoDbUrl, ...observe }), sqs: await startCountingProxy({ target: sqs.url, ...observe }) }
      : undefined;
    if (proxies) {
      traffic.appProxies.push(proxies);
      cleanup.push({ run: () => proxies.dynamoDb.stop() }, { run: () => proxies.sqs.stop() });
    }
    const deployment = await startDeployment({
      ...shared,
      id,
      peers: deploymentIds.filter((other) => other !== id),
      endpoints: proxies ? { dynamoDb: proxies.dynamoDb.url, sqs: proxies.sqs.url } : { dynamoDb: dynamoDbUrl, sqs: sqs.url },
      proxies,
    });
    deployments.push(deployment.view);
    cleanup.push({ what: `deployment ${id}`, run: deployment.close });
  }
  return deployments;
}

/** What the running stack is made of, for its handle. */
interface StackParts {
  services: StackServices;
  fleet: Fleet;
  deployments: LocalDeployment[];
  ledger: InvocationLedger;
  counted: LocalStack["traffic"] | undefined;
  site: string;
  tables: { lease: string; admission: string };
  timings: StackTimings;
  workDir: string;
  dynamoClient: DynamoDBClient;
  sqsClient: SQSClient;
}

function localStackHandle(parts: StackParts, cleanup: CleanupSteps): LocalStack {
  const { services, fleet, deployments, counted, site, tables, dynamoClient, sqsClient } = parts;
  const lease = async (): Promise<LeaseView | undefined> => {
    const reply = await dynamoClient.send(
      new GetItemCommand({ TableName: tables.lease, Key: { site: { S: site } }, ConsistentRead: true }),
    );
    const item = reply.Item;
    if (!item?.holder?.S || !item.term?.N || !item.expiresAt?.N) return undefined;
    return { holder: item.holder.S, term: Number(item.term.N), expiresAt: Number(item.expiresAt.N) };
  };

  let stopped = false;
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  let starting = false;
  return {
    nats: services.nats,
    dynamoDb: { url: services.dynamoDbUrl, pid: services.dynamoDb?.pid },
    sqs: services.sqs,
    fleet,
    deployments,
    ledger: parts.ledger,
    get traffic() {
      if (!counted) throw new TrafficNotCountedError("traffic");
      return counted;
    },
    site,
    tables,
    timings: parts.timings,
    workDir: parts.workDir,
    start() {
      if (starting) return;
      starting = true;
      void startInOrder(deployments, lease, () => stopped).then(markStarted);
    },
    started,
    lifecycleEvents: () => countLifecycleEvents(fleet, deployments, services.nats.url, site),
    lease,
    deadLetters: () => readDeadLetters(sqsClient, deployments),
    async stop(onStep) {
      if (stopped) return;
      stopped = true;
      await cleanup.runAll(onStep);
    },
  };
}

/** Starts the first deployment's sources and, once it leads (or after two lease durations), the others'. */
async function startInOrder(deployments: LocalDeployment[], lease: () => Promise<LeaseView | undefined>, stopped: () => boolean): Promise<void> {
  const [first, ...others] = deployments;
  for (const source of first?.sources ?? []) source.start();
  // A standby joins a site whose lease is held: wait until the first deployment leads (its
  // keeper's first round), or give up waiting after two lease durations and let them contest.
  const waitUntil = Date.now() + 2 * 30_000;
  while (first && others.length > 0 && !stopped() && Date.now() < waitUntil) {
    const current = await lease().catch(() => undefined);
    if (current?.holder === first.id && current.expiresAt > Date.now()) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (!stopped()) for (const deployment of others) for (const source of deployment.sources) source.start();
}

async function countLifecycleEvents(fleet: Fleet, deployments: LocalDeployment[], natsUrl: string, site: string): Promise<LifecycleEventCount> {
  const published = fleet.lifecycleEvents.filter((event) => event.subject === lifecycleSubject("startup", "provision_mode_server")).length;
  const reachedLeader = Object.fromEntries(deployments.map((deployment) => [deployment.id, deployment.metrics.total(EXTRA_METRIC.lifecycleEventsReceived)]));
  const droppedPaused = deployments.reduce((sum, deployment) => sum + deployment.metrics.total(EXTRA_METRIC.lifecycleEventsDropped), 0);
  const deadLettered = deployments.reduce((sum, deployment) => sum + deployment.metrics.total(EXTRA_METRIC.lifecycleEventsDeadLettered), 0);
  const pendingInStream = await streamPending(natsUrl, site).catch(() => 0);
  const reached = Object.values(reachedLeader).reduce((sum, count) => sum + count, 0);
  return {
    published,
    reachedLeader,
    droppedPaused,
    deadLettered,
    pendingInStream,
    noneLost: droppedPaused === 0 && deadLettered === 0 && pendingInStream === 0 && reached >= published,
  };
}

/** Events still in the lifecycle stream for the site's consumer. */
async function streamPending(natsUrl: string, site: string): Promise<number> {
  const nc = await connectNats({ servers: natsUrl });
  try {
    const jsm = await nc.jetstreamManager();
    const info = await jsm.consumers.info(LIFECYCLE_STREAM, defaultConsumerName(site)).catch(() => undefined);
    return info ? info.num_pending + info.num_ack_pending : 0;
  } finally {
    await nc.close();
  }
}

async function readDeadLetters(sqsClient: SQSClient, deployments: LocalDeployment[]): Promise<DeadLetter[]> {
  const letters: DeadLetter[] = [];
  for (const deployment of deployments) {
    const seen = new Set<string>();
    for (;;) {
      const reply = await sqsClient.send(
        new ReceiveMessageCommand({
          QueueUrl: deployment.queues.hostWorkDlq,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 30,
          WaitTimeSeconds: 0,
          MessageAttributeNames: ["All"],
        }),
      );
      const messages = (reply.Messages ?? []).filter((m) => m.MessageId && !seen.has(m.MessageId));
      if (messages.length === 0) break;
      for (const message of messages) {
        seen.add(message.MessageId as string);
        letters.push({
          deployment: deployment.id,
          identity: identityOf(message.Body),
          reason: message.MessageAttributes?.reason?.StringValue,
          body: message.Body ?? "",
        });
      }
    }
  }
  return letters;
}

function identityOf(body: string | undefined): string | undefined {
  try {
    const parsed = JSON.parse(body ?? "") as { identity?: unknown };
    return typeof parsed.identity === "string" ? parsed.identity : undefined;
  } catch {
    return undefined;
  }
}

interface DeploymentInput {
  id: string;
  /** The site's other deployments, named in `lease.peers` as docs/deploy.md asks of a real site. */
  peers: string[];
  site: string;
  options: LocalStackOptions;
  timings: StackTimings;
  features: Set<FeatureName>;
  natsUrl: string;
  sqs: RunningSqs;
  sqsClient: SQSClient;
  tables: { lease: string; admission: string };
  /** Where the App's SDK clients connect: its counting proxies, or the services themselves. */
  endpoints: { dynamoDb: string; sqs: string };
  proxies: AppProxies | undefined;
  ledger: InvocationLedger;
  logger: Logger;
  signerFile: string;
  signingKeyFile: string;
  workDir: string;
}

interface AppProxies {
  dynamoDb: CountingProxy;
  sqs: CountingProxy;
}

function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9-]/g, "-");
}

async function startDeployment(input: DeploymentInput): Promise<{ view: LocalDeployment; close: () => Promise<void> }> {
  const { id, options } = input;
  const prefix = `choria-provisioner-${safeName(id)}`;
  const queues = createDeploymentQueues(input, prefix);
  const helper = options.helper ?? "node";
  const helperCommand = typeof helper === "object" ? helper.command : helper === "inline" ? HELPERS.node : HELPERS[helper];
  if (helper === "bash") await chmod(HELPERS.bash, 0o755).catch(() => undefined);
  const env = deploymentEnv(input, prefix, deploymentConfig(input, helperCommand), queues);
  await writeFile(join(input.workDir, `${safeName(id)}.env`), exportLines(env));

  const handlers = await loadHandlers();
  const metrics = new InMemoryMetrics(input.site);
  const extra = options.overrides?.(id) ?? {};
  const overrides: AppOverrides = {
    logger: input.logger,
    // Also into the handlers' Powertools instance, so its per-invocation flush finds metrics (and,
    // disabled locally, prints nothing) instead of warning about an empty flush on every invocation.
    metrics: teeMetrics(metrics, createPowertoolsMetrics({ site: input.site, metrics: handlers.powertoolsMetrics })),
    ...(helper === "inline" ? { helper: await inlineHelper() } : {}),
    ...extra,
  };
  const app = await createApp(appSettingsFromEnv(env), overrides);
  const functions = functionSpecs(prefix, input.timings);
  const sources = eventSources(input, { app, handlers, functions, queues });
  return {
    view: deploymentView(input, { app, metrics, functions, queues, env, sources }),
    close: async () => {
      await Promise.all(sources.map((source) => source.stop(3_000)));
      await app.close().catch(() => undefined);
    },
  };
}

interface DeploymentQueues {
  hostWork: ReturnType<typeof createQueueWithDeadLetter>;
  lifecycle: ReturnType<typeof createQueueWithDeadLetter>;
}

function createDeploymentQueues(input: DeploymentInput, prefix: string): DeploymentQueues {
  const { options, timings } = input;
  const deadLetterAttributes = { MessageRetentionPeriod: String(DEPLOYED.deadLetterRetentionSeconds) };
  const hostWork = createQueueWithDeadLetter(input.sqs, `${prefix}-host-work`, {
    maxReceiveCount: options.maxReceiveCount ?? timings.hostWork.maxReceiveCount,
    attributes: { VisibilityTimeout: String(timings.hostWork.visibilitySeconds) },
    deadLetterAttributes,
  });
  const lifecycle = createQueueWithDeadLetter(input.sqs, `${prefix}-lifecycle`, {
    maxReceiveCount: timings.lifecycle.maxReceiveCount,
    attributes: { VisibilityTimeout: String(timings.lifecycle.visibilitySeconds) },
    deadLetterAttributes,
  });
  return { hostWork, lifecycle };
}

/** The provisioner configuration of the deployment (PROVISIONER_CONFIG_YAML), the caller's `config` over the stack's. */
function deploymentConfig(input: DeploymentInput, helperCommand: string): Record<string, unknown> {
  const { id, options, timings, features } = input;
  return {
    site: input.site,
    broker_urls: [input.natsUrl],
    choria_insecure: true,
    helper: helperCommand,
    token: TOKEN,
    workers: options.workers ?? 10,
    loglevel: "info",
    features: { jwt: features.has("jwt") || features.has("ed25519"), ed25519: features.has("ed25519"), pki: features.has("pki") },
    ...(features.has("jwt") || features.has("ed25519") ? { jwt_verify_cert: input.signerFile } : {}),
    ...(features.has("ed25519") ? { jwt_signing_key: input.signingKeyFile } : {}),
    leader_election: true,
    deployment_id: id,
    lease: { ...timings.lease, ...(input.peers.length > 0 ? { peers: input.peers } : {}) },
    ...(options.distinctCallerIds ? { callerid: `choria=provisioner-${safeName(id)}` } : {}),
    ...(options.natsCaFile === undefined ? {} : { choria_insecure: false, tls: { ca: options.natsCaFile } }),
    ...options.config?.(id),
  };
}

function deploymentEnv(input: DeploymentInput, prefix: string, config: Record<string, unknown>, queues: DeploymentQueues): Record<string, string> {
  const { hostWork, lifecycle } = queues;
  return {
    PROVISIONER_CONFIG_YAML: toYaml(config),
    LEASE_TABLE: input.tables.lease,
    ADMISSION_TABLE: input.tables.admission,
    HOST_WORK_QUEUE_URL: hostWork.url,
    HOST_WORK_DLQ_URL: hostWork.deadLetterUrl,
    LIFECYCLE_QUEUE_URL: lifecycle.url,
    LIFECYCLE_DLQ_URL: lifecycle.deadLetterUrl,
    DYNAMODB_ENDPOINT: input.endpoints.dynamoDb,
    SQS_ENDPOINT: input.endpoints.sqs,
    AWS_REGION: LOCAL_AWS.region,
    LIFECYCLE_STREAM,
    POWERTOOLS_SERVICE_NAME: prefix,
    POWERTOOLS_METRICS_NAMESPACE: APP_DEFAULTS.metricsNamespace,
    RETRY_BASE_DELAY_SECONDS: String(input.timings.retryBaseDelaySeconds),
    KEEPER_RATE_SECONDS: String(Math.round(input.timings.keeperRateMs / 1000)),
    RETRY_MAX_DELAY_SECONDS: String(input.timings.retryMaxDelaySeconds),
  };
}

type FunctionSpecs = Record<keyof FunctionNames, FunctionSpec>;

function functionSpecs(prefix: string, timings: StackTimings): FunctionSpecs {
  const fn = (name: string, timeoutMs: number, deployed: DeployedFunction): FunctionSpec => ({
    name: `${prefix}-${name}`,
    timeoutMs,
    memoryMb: DEPLOYED.functions[deployed].memoryMb,
  });
  return {
    discover: fn("discover", timings.discoverTimeoutMs, "discover"),
    leaseKeeper: fn("lease-keeper", timings.keeperTimeoutMs, "leaseKeeper"),
    lifecycle: fn("lifecycle", timings.lifecycleTimeoutMs, "lifecycle"),
    provision: fn("provision", timings.provisionTimeoutMs, "provision"),
    renew: fn("renew", timings.renewTimeoutMs, "renew"),
  };
}

/**
 * The deployment's emulated schedules and SQS event source mappings, bound to the real handlers.
 */
function eventSources(
  input: DeploymentInput,
  deployment: { app: App; handlers: Handlers; functions: FunctionSpecs; queues: DeploymentQueues },
): EventSource[] {
  const { options, timings } = input;
  const { app, handlers, functions, queues } = deployment;
  const getApp = () => Promise.resolve(app);
  const onDelivery = input.options.onDelivery;
  const common = { ledger: input.ledger, logger: input.logger, ...(onDelivery ? { onDelivery } : {}) };
  const asSchedule = (handler: unknown) => handler as ScheduleHandler;
  const asSqs = (handler: unknown) => handler as SqsHandler;
  const keeper = new ScheduleSource({ ...common, function: functions.leaseKeeper, rateMs: timings.keeperRateMs, handler: asSchedule(handlers.leaseKeeper(getApp)) });
  const sources: EventSource[] = [
    keeper,
    new ScheduleSource({ ...common, function: functions.discover, rateMs: timings.discoverRateMs, handler: asSchedule(handlers.discover(getApp)) }),
    new SqsEventSource({
      ...common,
      sqs: input.sqsClient,
      queueUrl: queues.lifecycle.url,
      queueArn: queues.lifecycle.arn,
      function: functions.lifecycle,
      handler: asSqs(handlers.lifecycle(getApp)),
      batchSize: timings.lifecycle.batchSize,
      maxConcurrency: timings.lifecycle.maxConcurrency,
      waitTimeSeconds: options.waitTimeSeconds ?? 2,
    }),
    new SqsEventSource({
      ...common,
      sqs: input.sqsClient,
      queueUrl: queues.hostWork.url,
      queueArn: queues.hostWork.arn,
      function: functions.provision,
      handler: asSqs(handlers.provision(getApp)),
      batchSize: options.batchSize ?? timings.hostWork.batchSize,
      maxConcurrency: options.maxConcurrency ?? timings.hostWork.maxConcurrency,
      waitTimeSeconds: options.waitTimeSeconds ?? 2,
    }),
    // As on AWS the schedule would run everywhere, but without a main broker each run only answers
    // `not-configured`; left out here (unless asked for) so a stack without renewal keeps its ledger as before.
    ...(app.config.renew.brokerUrls.length > 0 || options.renewEverywhere
      ? [
          new ScheduleSource({
            ...common,
            function: functions.renew,
            rateMs: timings.renewRateMs,
            // serverless.yml's reservedConcurrency 1: a tick while a run is still going is throttled.
            reservedConcurrency: 1,
            handler: asSchedule(handlers.renew(getApp)),
          }),
        ]
      : []),
  ];
  return sources;
}

function deploymentView(
  input: DeploymentInput,
  parts: { app: App; metrics: InMemoryMetrics; functions: FunctionSpecs; queues: DeploymentQueues; env: Record<string, string>; sources: EventSource[] },
): LocalDeployment {
  const { functions, queues, sources } = parts;
  let crashed = false;
  return {
    id: input.id,
    tables: input.tables,
    app: parts.app,
    metrics: parts.metrics,
    functions: {
      discover: functions.discover.name,
      leaseKeeper: functions.leaseKeeper.name,
      lifecycle: functions.lifecycle.name,
      provision: functions.provision.name,
      renew: functions.renew.name,
    },
    queues: { hostWork: queues.hostWork.url, hostWorkDlq: queues.hostWork.deadLetterUrl, lifecycle: queues.lifecycle.url, lifecycleDlq: queues.lifecycle.deadLetterUrl },
    env: parts.env,
    sources,
    get crashed() {
      return crashed;
    },
    kill() {
      const proxies = input.proxies;
      if (!proxies) throw new TrafficNotCountedError("kill()");
      crashed = true;
      for (const source of sources) source.kill();
      proxies.dynamoDb.block();
      proxies.sqs.block();
    },
  };
}

function teeMetrics(...targets: Metrics[]): Metrics {
  return {
    gauge: (name, value, labels) => targets.forEach((target) => target.gauge(name, value, labels)),
    count: (name, increment, labels) => targets.forEach((target) => target.count(name, increment, labels)),
    timing: (name, seconds, labels) => targets.forEach((target) => target.timing(name, seconds, labels)),
  };
}

type Handlers = Awaited<ReturnType<typeof loadHandlers>>;

/**
 * The real handler modules. EMF output is off (POWERTOOLS_METRICS_DISABLED, set by
 * quiet-powertools.ts before any of them loaded) unless the caller set it; the Apps' metrics are
 * kept in memory.
 */
async function loadHandlers() {
  const [discover, leaseKeeper, lifecycle, provision, renew, runtime] = await Promise.all([
    import("../../handlers/discover"),
    import("../../handlers/lease-keeper"),
    import("../../handlers/lifecycle"),
    import("../../handlers/provision"),
    import("../../handlers/renew"),
    import("../../lib/aws/runtime"),
  ]);
  const powertoolsMetrics = runtime.powertoolsRuntime().metrics;
  // Invocations that emit no metric make Powertools warn on stderr at every flush, which would tear
  // the live progress line; its console is the only place that warning can be caught.
  const metricsConsole = (powertoolsMetrics as unknown as { console?: { warn: (...args: unknown[]) => void } }).console;
  if (metricsConsole) metricsConsole.warn = () => undefined;
  return {
    discover: discover.makeHandler,
    leaseKeeper: leaseKeeper.makeHandler,
    lifecycle: lifecycle.makeHandler,
    provision: provision.makeHandler,
    renew: renew.makeHandler,
    powertoolsMetrics,
  };
}

/** The example helper's rules run in this process: measures the pipeline without a process per host. */
async function inlineHelper(): Promise<HelperRunner> {
  const { decide } = await import("../../examples/helpers/decide.mjs");
  return {
    run: async (request) => decodeHelperResponse(Buffer.from(JSON.stringify(decide(request, process.env))), "inline example helper"),
  };
}
