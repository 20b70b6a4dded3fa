/**
 * The pieces every function is composed of, and that only: the configuration (this function's
 * secrets resolved), the logger and metrics, the DynamoDB and SQS clients, the queues, the admission
 * registry and the lease gate. Nothing here reads a key or TLS file, connects to the broker or
 * loads the engine: the functions that need those add them (compose-broker.ts, compose-engine.ts),
 * so esbuild bundles into each function only what it uses. Nothing is connected until first used.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import type { Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import { AdmissionRegistry } from "../admission/registry";
import { AdmissionFlow } from "../app/admission-flow";
import { Invocations, withInvocationAttributes } from "../app/invocation";
import { Leadership } from "../app/leadership";
import { TickArming } from "../app/ticks";
import type { StatusQueues } from "../app/operator/report";
import type { Broker } from "../app/use-case-ports";
import { tableArnRegion, type AppSettings } from "./settings";
import { AppSettingsError, SecretResolutionError } from "../errors";
import { loadConfig } from "../config/load";
import { secretValues } from "../config/keys";
import type { FunctionName, SecretResolver } from "../config/secrets";
import type { ProvisionerConfig } from "../config/types";
import type { RandomSource } from "../engine/retry";
import { DynamoDbAdmissionStore } from "../dynamodb/admission-store";
import type { DynamoDBClient } from "../dynamodb/client";
import type { PauseStore } from "../ports/pause-store";
import type { LeaseGate, OnWonTerm } from "../ports/lease-gate";
import type { LeaseStore } from "../ports/lease-store";
import { systemClock, type Clock } from "../ports/clock";
import type { HelperRunner } from "../ports/helper";
import type { LogAttributes, Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import { createLeaseClient, createSqsClient, createStoreClient, endpointConfig, STORE_CLIENT_FAILS_WITHIN_MS } from "./clients";
import { createAppLeaseGate } from "./compose-lease-gate";
import { createLogger } from "./powertools-logger";
import { createPowertoolsMetrics } from "./powertools-metrics";
import { SqsMessageQueue } from "./sqs-queue";

/** The pause before an admission whose outcome stayed unknown is sent again: a store blip under load passes in about a second. */
const ADMISSION_RESEND_PAUSE_MS = 1_000;

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

/** What one function is built from; see the module comment. */
export interface FunctionParts {
  readonly settings: AppSettings;
  readonly overrides: AppOverrides;
  readonly config: ProvisionerConfig;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Request correlation carried into every log line of an invocation. */
  readonly attributes: AsyncLocalStorage<LogAttributes>;
  readonly queues: StatusQueues;
  /** The queues' SQS client (provision takes more host work with it while a batch runs). */
  readonly sqsClient: SQSClient;
  readonly registry: AdmissionRegistry;
  /** The admission table's client (the registry's, and renewal's state in the same table). */
  readonly storeClient: DynamoDBClient;
  /** The lease table's client (in the table's Region). */
  readonly leaseClient: DynamoDBClient;
  readonly gate: LeaseGate;
  /** Absent when leader election is off. */
  readonly leaseStore: LeaseStore | undefined;
  /** The operator's pause switches (same table); absent when leader election is off. */
  readonly pauseStore: PauseStore | undefined;
  /** `announce` is called with every term this function's gate wins (leadership registers it). */
  announceWonTerms(announce: OnWonTerm): void;
  /** Runs `close` first when the function closes (e.g. the broker connection). */
  closing(close: () => Promise<void>): void;
  close(): Promise<void>;
}

/**
 * The shared pieces of a function. `secrets` builds the resolver of `ssm:` / `secretsmanager:`
 * references for a function that resolves any (the Powertools parameters utility); `status` and
 * `release` resolve none and pass none, so their bundles carry no SSM or Secrets Manager client.
 */
export async function composeParts(settings: AppSettings, overrides: AppOverrides, secrets?: () => SecretResolver): Promise<FunctionParts> {
  const clock = overrides.clock ?? systemClock;
  const config =
    overrides.config ??
    (await loadConfig({
      env: settings.configEnv,
      function: settings.function,
      secrets: overrides.secrets ?? secrets?.() ?? resolvesNothing(settings.function),
      logger: overrides.logger ?? createLogger({ logger: overrides.powertools?.logger, serviceName: settings.serviceName }),
    }));
  if (config.leaderElection && !settings.leaseTable) {
    throw new AppSettingsError([{ variable: "LEASE_TABLE", message: "is required when leader_election is on" }]);
  }

  const attributes = new AsyncLocalStorage<LogAttributes>();
  const logger = withInvocationAttributes(overrides.logger ?? powertoolsLogger(config, settings, overrides.powertools?.logger), attributes);
  const metrics =
    overrides.metrics ??
    createPowertoolsMetrics({
      site: config.site,
      namespace: settings.metricsNamespace,
      serviceName: settings.serviceName,
      metrics: overrides.powertools?.metrics,
    });

  const dynamodb = endpointConfig(settings.region, settings.dynamoDbEndpoint);
  // A lease table given by ARN may live in another Region (the site's home Region); its client goes there.
  const leaseRegion = settings.leaseTable ? tableArnRegion(settings.leaseTable) : undefined;
  const leaseClient = createLeaseClient({ ...dynamodb, ...(leaseRegion ? { region: leaseRegion } : {}) });
  // So may the site's admission table, when a deployment in another Region names it by ARN.
  const admissionRegion = tableArnRegion(settings.admissionTable);
  const storeClient = createStoreClient({ ...dynamodb, ...(admissionRegion ? { region: admissionRegion } : {}) });
  const sqsClient = createSqsClient(endpointConfig(settings.region, settings.sqsEndpoint));

  const registry = new AdmissionRegistry(
    { site: config.site, intervalMs: config.intervalMs, provisioningJwtWarningMs: config.provisioningJwtWarningMs },
    { store: new DynamoDbAdmissionStore({ client: storeClient, tableName: settings.admissionTable }), metrics, clock, logger },
  );
  const queue = (url: string) => new SqsMessageQueue({ client: sqsClient, url, logger, clock });
  const queues: StatusQueues = {
    hostWork: queue(settings.hostWorkQueueUrl),
    hostWorkDlq: queue(settings.hostWorkDlqUrl),
    lifecycle: queue(settings.lifecycleQueueUrl),
    lifecycleDlq: queue(settings.lifecycleDlqUrl),
  };
  // The gate's onWon needs leadership, which needs the gate: leadership registers itself later.
  const won: { announce?: OnWonTerm } = {};
  const { gate, leaseStore, pauseStore } = createAppLeaseGate(config, {
    client: leaseClient,
    tableName: settings.leaseTable,
    metrics,
    clock,
    logger,
    onWon: (term, remainingMs) => won.announce?.(term, remainingMs),
  });
  const closers: Array<() => Promise<void>> = [];
  return {
    settings,
    overrides,
    config,
    clock,
    logger,
    metrics,
    attributes,
    queues,
    sqsClient,
    registry,
    storeClient,
    leaseClient,
    gate,
    leaseStore,
    pauseStore,
    announceWonTerms: (announce) => {
      won.announce = announce;
    },
    closing: (close) => closers.push(close),
    close: async () => {
      for (const close of closers) await close();
      leaseClient.destroy();
      storeClient.destroy();
      sqsClient.destroy();
    },
  };
}

/**
 * The one admit-and-enqueue flow of discovery, lifecycle events and reprovision. An admission whose
 * outcome stayed unknown is sent again only while the caller's time still covers a whole admission
 * against a stalled store (a write and its settling read, each at the store client's bound).
 */
export function admissionFlow(parts: FunctionParts): AdmissionFlow {
  return new AdmissionFlow({
    registry: parts.registry,
    hostWork: parts.queues.hostWork,
    logger: parts.logger,
    clock: parts.clock,
    resendUnknown: { pauseMs: ADMISSION_RESEND_PAUSE_MS, withinMs: 2 * STORE_CLIENT_FAILS_WITHIN_MS },
  });
}

/**
 * Leadership on `broker`; it announces every term this function's gate wins (startup event and an
 * immediate discovery), whichever use case read the gate when it was won.
 */
export function composeLeadership(parts: FunctionParts, broker: Pick<Broker, "discover" | "publishStartup">, admission = admissionFlow(parts)): Leadership {
  const { config } = parts;
  const leadership = new Leadership({
    settings: {
      leaderElection: config.leaderElection,
      identity: config.identity,
      discoveryMaxNodes: config.discoveryMaxNodes,
      discoveryNewNamesPerInterval: config.discoveryNewNamesPerInterval,
      discoveryIntervalMs: config.intervalMs,
      discoveryBacklogMs: config.discoveryBacklogMs,
      allowShortIdentities: config.allowShortIdentities,
      deadlineMarginMs: parts.settings.deadlineMarginMs,
    },
    gate: parts.gate,
    ticks: tickArming(parts),
    broker,
    admission,
    registry: parts.registry,
    hostWork: parts.queues.hostWork,
    continuations: parts.queues.lifecycle,
    clock: parts.clock,
    logger: parts.logger,
    metrics: parts.metrics,
    ...(parts.overrides.random ? { random: parts.overrides.random } : {}),
  });
  parts.announceWonTerms((term, remainingMs) => leadership.onWonTerm(term, remainingMs));
  return leadership;
}

/** The ticks between the keeper's runs, armed on this deployment's lifecycle queue (lib/app/ticks.ts). */
export function tickArming(parts: FunctionParts): TickArming {
  const timing = { keepIntervalMs: parts.config.lease.keepIntervalMs, armAheadMs: parts.settings.keeperRateSeconds * 1000 };
  return new TickArming({ queue: parts.queues.lifecycle, timing, clock: parts.clock, logger: parts.logger });
}

/** The per-invocation wrapper of the functions that read the gate and may send to the broker. */
export function composeInvocations(parts: FunctionParts, broker: Pick<Broker, "closeIfPublishPending">): Invocations {
  return new Invocations({ gate: parts.gate, broker, logger: parts.logger, attributes: parts.attributes });
}

/**
 * Function `fn` composed from its settings for its handler (handlers/*.ts): its parts, resolving no
 * secret (`status`, `release`), then `on` them. A broker function composes with `brokerFunction`.
 */
export function partsFunction<T>(fn: FunctionName, on: (parts: FunctionParts) => T): (settings: AppSettings, overrides: AppOverrides) => Promise<T> {
  return async (settings, overrides) => on(await composeParts(functionSettings(settings, fn), overrides));
}

/** The settings of function `fn`: its composition resolves only `fn`'s secrets (lib/config/secrets.ts). */
export function functionSettings(settings: AppSettings, fn: FunctionName): AppSettings {
  return { ...settings, function: fn };
}

/** The resolver of a function whose settings list no reference: asking it is a wiring mistake, named as such. */
function resolvesNothing(fn: FunctionName | undefined): SecretResolver {
  return {
    resolve: async () => {
      throw new SecretResolutionError(`the ${fn ?? "local"} function resolves no secret references`);
    },
  };
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
