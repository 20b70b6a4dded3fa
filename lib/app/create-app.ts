/**
 * Composition: the configuration, the AWS clients (DynamoDB with a short request timeout for the
 * lease, SQS), the broker connection and the domain objects, wired into one ProvisionerApp per
 * container. Nothing is connected until first used.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import type { Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import type { NatsConnection } from "nats";
import { DynamoDbAdmissionStore } from "../admission/dynamodb-admission-store";
import { AdmissionRegistry } from "../admission/registry";
import { publishStartupEvent, SharedBrokerConnection } from "../choria/connection";
import { BroadcastDiscoverer, type DiscoveryResult } from "../choria/discovery";
import { NatsChoriaRpc, type ChoriaClientSettings } from "../choria/rpc-client";
import { leaseSettingsOf, loadConfig, secretValues, type ProvisionerConfig, type SecretResolver } from "../config";
import { functionUses } from "../config/secrets";
import { createPowertoolsSecretResolver } from "../config/powertools-secrets";
import { ProvisionEngine, type EngineSettings, type RandomSource } from "../engine";
import { createHelperRunner } from "../helper/aws-lambda-invoke";
import { DynamoDbLeaseStore } from "../lease/dynamodb-lease-store";
import { createLeaseGate, type LeaseGate } from "../lease/gate";
import type { LeaseStore } from "../lease/lease";
import { DynamoDbPauseStore } from "../lease/pause";
import { createLogger, createPowertoolsMetrics } from "../observability";
import { systemClock, type ChoriaRpc, type Clock, type HelperRunner, type LogAttributes, type Logger, type Metrics } from "../ports";
import { ProvisionerApp, type App, type BrokerAccess } from "./app";
import { brokerSettings, choriaClientSettings, loadEngineKeys, warnInsecureSigner } from "./choria-client";
import { AppSettingsError, tableArnRegion, type AppSettings } from "./settings";
import { SqsMessageQueue } from "./sqs-queue";

/** The version announced in the provisioner's startup event. */
export const PROVISIONER_VERSION = "0.1.0";

/** Static credentials for local emulators (DYNAMODB_ENDPOINT / SQS_ENDPOINT); not secrets, never sent to AWS. */
const LOCAL_CREDENTIALS = { accessKeyId: "local", secretAccessKey: "local" } as const;
/** A hung lease store must close the gate quickly rather than stall an attempt (docs/lease.md). */
const LEASE_REQUEST_TIMEOUT_MS = 1_500;
/** One whole gate round (writes, settling read, SDK retries) may take at most this long. */
const LEASE_ROUND_TIMEOUT_MS = 4_000;
const STORE_REQUEST_TIMEOUT_MS = 5_000;

export interface AppOverrides {
  clock?: Clock;
  /** Replaces the Powertools logger (tests, the local run). Secrets are not masked for you then. */
  logger?: Logger;
  metrics?: Metrics;
  helper?: HelperRunner;
  random?: RandomSource;
  /** An already loaded configuration instead of reading `settings.configEnv`. */
  config?: ProvisionerConfig;
  /** Resolves `ssm:` / `secretsmanager:` references; default Powertools parameters. */
  secrets?: SecretResolver;
  /** The Powertools instances the handler middlewares flush and enrich. */
  powertools?: { logger?: PowertoolsLogger; metrics?: PowertoolsMetrics };
}

export async function createApp(settings: AppSettings, overrides: AppOverrides = {}): Promise<App> {
  const clock = overrides.clock ?? systemClock;
  const config =
    overrides.config ??
    (await loadConfig({
      env: settings.configEnv,
      function: settings.function,
      secrets: overrides.secrets ?? createPowertoolsSecretResolver(),
      logger: overrides.logger ?? createLogger({ logger: overrides.powertools?.logger, serviceName: settings.serviceName }),
    }));
  if (config.leaderElection && !settings.leaseTable) {
    throw new AppSettingsError("LEASE_TABLE", "is required when leader_election is on");
  }

  const invocations = new AsyncLocalStorage<LogAttributes>();
  const logger = withInvocationAttributes(overrides.logger ?? powertoolsLogger(config, settings, overrides.powertools?.logger), invocations);
  const metrics =
    overrides.metrics ??
    createPowertoolsMetrics({
      site: config.site,
      namespace: settings.metricsNamespace,
      serviceName: settings.serviceName,
      metrics: overrides.powertools?.metrics,
    });

  const aws = awsClientConfig(settings);
  // A lease table given by ARN may live in another Region (the site's home Region); its client goes there.
  const leaseRegion = settings.leaseTable ? tableArnRegion(settings.leaseTable) : undefined;
  const leaseClient = createLeaseClient({ ...aws.dynamodb, ...(leaseRegion ? { region: leaseRegion } : {}) });
  const storeClient = new DynamoDBClient({
    ...aws.dynamodb,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
  const sqsClient = new SQSClient({
    ...aws.sqs,
    requestHandler: { requestTimeout: STORE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });

  const registry = new AdmissionRegistry(
    { site: config.site, intervalMs: config.intervalMs },
    { store: new DynamoDbAdmissionStore({ client: storeClient, tableName: settings.admissionTable }), metrics, clock, logger },
  );
  const queue = (url: string) => new SqsMessageQueue({ client: sqsClient, url, logger, clock });

  // Each function composes only what it uses: `status` and `release` never reach the broker, and
  // only `provision` configures nodes, so only their secrets were resolved (lib/config/secrets.ts).
  const usesBroker = functionUses(settings.function, "tls.key");
  const provisions = functionUses(settings.function, "token");
  if (usesBroker) warnInsecureSigner(config, logger);
  const broker = usesBroker
    ? new AppBroker(
        new SharedBrokerConnection(await brokerSettings(config, `choria-provisioner ${config.deploymentId}`)),
        await choriaClientSettings(config, clock, logger),
        config,
        clock,
      )
    : noBroker(settings.function as string);
  const keys = provisions ? await loadEngineKeys(config) : {};
  const engineSettings: EngineSettings = {
    features: config.features,
    token: provisions ? (config.token ?? "") : "",
    certDenyList: config.certDenyList,
    serverJwtValidityMs: config.serverJwtValidityMs,
    upgradesRepository: config.upgradesRepository ?? "",
    upgradesOptional: config.upgradesOptional,
    intervalMs: config.intervalMs,
    helperTimeoutMs: config.helperTimeoutMs,
    ...keys,
  };

  // The gate's onWon needs the app, and the app needs the gate.
  const built: { app?: ProvisionerApp } = {};
  const { gate, leaseStore } = createAppLeaseGate(config, {
    client: leaseClient,
    tableName: settings.leaseTable,
    metrics,
    clock,
    logger,
    onWon: (term) => built.app?.onWonTerm(term),
  });
  const engine = new ProvisionEngine({
    settings: engineSettings,
    rpc: broker.rpc,
    gate,
    helper: overrides.helper ?? createHelperRunner(config),
    metrics,
    clock,
    logger,
    ...(overrides.random ? { random: overrides.random } : {}),
  });

  const app = new ProvisionerApp({
    config,
    gate,
    leaseStore,
    registry,
    engine,
    queues: {
      hostWork: queue(settings.hostWorkQueueUrl),
      hostWorkDlq: queue(settings.hostWorkDlqUrl),
      lifecycle: queue(settings.lifecycleQueueUrl),
      lifecycleDlq: queue(settings.lifecycleDlqUrl),
    },
    broker,
    clock,
    logger,
    metrics,
    retry: { baseDelaySeconds: settings.retryBaseDelaySeconds, maxDelaySeconds: settings.retryMaxDelaySeconds },
    failureLimit: settings.hostFailureLimit,
    deadlineMarginMs: settings.deadlineMarginMs,
    lifecycle: { stream: settings.lifecycleStream, consumer: settings.lifecycleConsumer ?? defaultConsumerName(config.site) },
    invocations,
    onClose: async () => {
      leaseClient.destroy();
      storeClient.destroy();
      sqsClient.destroy();
    },
  });
  built.app = app;
  logger.info("provisioner app ready", { site: config.site, deploymentId: config.deploymentId, leaderElection: config.leaderElection });
  return app;
}

/** The lease table's client: a hung store must close the gate quickly (docs/lease.md). */
export function createLeaseClient(config: DynamoDBClientConfig): DynamoDBClient {
  return new DynamoDBClient({
    ...config,
    maxAttempts: 2,
    // Without throwOnRequestTimeout the pinned SDK only logs a warning when requestTimeout passes.
    requestHandler: { requestTimeout: LEASE_REQUEST_TIMEOUT_MS, connectionTimeout: 1_000, throwOnRequestTimeout: true },
  });
}

export interface AppLeaseGateDeps {
  client: DynamoDBClient;
  /** LEASE_TABLE; required when leader election is on. */
  tableName: string | undefined;
  metrics: Metrics;
  clock: Clock;
  logger: Logger;
  onWon?: (term: number) => void | Promise<void>;
}

/**
 * The lease gate as every function composes it (and bench/failover.ts measures it): the
 * configuration's lease settings, the request TTL as the delivery horizon, bounded rounds, and the
 * operator's pause switch read from the same table before every round.
 */
export function createAppLeaseGate(config: ProvisionerConfig, deps: AppLeaseGateDeps): { gate: LeaseGate; leaseStore: LeaseStore | undefined } {
  const tableName = deps.tableName ?? "";
  const leaseStore = config.leaderElection ? new DynamoDbLeaseStore({ client: deps.client, tableName }) : undefined;
  const gate = createLeaseGate(
    leaseSettingsOf(config, { roundTimeoutMs: LEASE_ROUND_TIMEOUT_MS }),
    {
      store: leaseStore,
      pause: leaseStore ? new DynamoDbPauseStore({ client: deps.client, tableName }) : undefined,
      metrics: deps.metrics,
      clock: deps.clock,
      logger: deps.logger,
      ...(deps.onWon ? { onWon: deps.onWon } : {}),
    },
  );
  return { gate, leaseStore };
}

/** JetStream durable names may not contain `.`, `*`, `>` or whitespace. */
export function defaultConsumerName(site: string): string {
  return `provisioner-${(site || "default").replace(/[.*>\s]/g, "_")}`;
}

function powertoolsLogger(config: ProvisionerConfig, settings: AppSettings, existing: PowertoolsLogger | undefined): Logger {
  const logger = createLogger({
    logger: existing,
    serviceName: settings.serviceName,
    level: config.loglevel,
    secretValues: secretValues(config),
  });
  // POWERTOOLS_LOG_LEVEL, when set, wins over the configuration's loglevel.
  if (existing && !settings.configEnv.POWERTOOLS_LOG_LEVEL) existing.setLogLevel(config.loglevel.toUpperCase() as "INFO");
  return logger;
}

/** Adds the current invocation's attributes (request id) to every line, also under concurrency. */
function withInvocationAttributes(logger: Logger, invocations: AsyncLocalStorage<LogAttributes>): Logger {
  const emit =
    (level: keyof Logger) =>
    (message: string, attributes?: LogAttributes): void => {
      const current = invocations.getStore();
      logger[level](message, current && Object.keys(current).length > 0 ? { ...current, ...attributes } : attributes);
    };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

function awsClientConfig(settings: AppSettings) {
  const region = settings.region ?? "us-east-1";
  const local = (endpoint: string | undefined) =>
    endpoint ? { region: settings.region ?? "us-east-1", endpoint, credentials: LOCAL_CREDENTIALS } : settings.region ? { region } : {};
  return { dynamodb: local(settings.dynamoDbEndpoint), sqs: local(settings.sqsEndpoint) };
}

/** The broker of a function that never connects: any use is a wiring mistake, named as such. */
function noBroker(fn: string): BrokerAccess & { rpc: ChoriaRpc } {
  const refuse = async (): Promise<never> => {
    throw new Error(`the ${fn} function does not connect to the broker`);
  };
  return {
    rpc: { call: refuse },
    connection: refuse,
    discover: refuse,
    prepareRpc: refuse,
    publishStartup: refuse,
    // Asked after every invocation: nothing was ever sent.
    closeIfPublishPending: async () => false,
    close: async () => undefined,
  };
}

/** The broker for the use cases: one shared connection, a discoverer and an RPC client bound to it. */
class AppBroker implements BrokerAccess {
  private bound: { nc: NatsConnection; rpc: NatsChoriaRpc } | undefined;
  /** Delegates to the client of the connection prepared last; the engine holds this one object. */
  readonly rpc: ChoriaRpc = {
    call: (call) => {
      if (!this.bound) throw new Error("the broker connection was not prepared before provisioning");
      return this.bound.rpc.call(call);
    },
  };

  constructor(
    private readonly shared: SharedBrokerConnection,
    private readonly client: ChoriaClientSettings,
    private readonly config: ProvisionerConfig,
    private readonly clock: Clock,
  ) {}

  connection(): Promise<NatsConnection> {
    return this.shared.get();
  }

  async discover(): Promise<DiscoveryResult> {
    const nc = await this.shared.get();
    return new BroadcastDiscoverer(nc, {
      ...this.client,
      discoveryTimeoutMs: this.config.discoveryTimeoutMs,
      maxIdentities: this.config.discoveryMaxNodes,
    }).discoverWithStats();
  }

  async closeIfPublishPending(): Promise<boolean> {
    if (!this.bound?.rpc.hasUnconfirmedPublishes()) return false;
    await this.close();
    return true;
  }

  async prepareRpc(): Promise<void> {
    const nc = await this.shared.get();
    if (this.bound?.nc !== nc) this.bound = { nc, rpc: new NatsChoriaRpc(nc, this.client) };
  }

  async publishStartup(): Promise<void> {
    await publishStartupEvent(await this.shared.get(), { identity: this.config.identity, version: PROVISIONER_VERSION, clock: this.clock });
  }

  async close(): Promise<void> {
    this.bound = undefined;
    await this.shared.close();
  }
}
