import { availableParallelism } from "node:os";
import type { z } from "zod";
import { RPC_PLAN } from "../engine/plan";
import { ConfigError } from "../errors";
import type { Logger } from "../ports";
import { DurationError, parseDuration } from "./duration";
import { NESTED_SECTIONS, TOP_LEVEL_KEYS, rawConfigSchema, type RawConfig } from "./schema";
import { SECRET_KEYS } from "./secrets";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface FeatureFlags {
  readonly pki: boolean;
  readonly jwt: boolean;
  readonly ed25519: boolean;
  readonly upgrades: boolean;
}

/** Each is a file path, or the PEM itself when it came from a secret store (lib/app `keyMaterial`). */
export interface TlsSettings {
  readonly ca: string | undefined;
  readonly cert: string | undefined;
  readonly key: string | undefined;
  readonly insecureSkipVerify: boolean;
}

export interface LeaseSettings {
  readonly durationMs: number;
  readonly renewIntervalMs: number;
  readonly skewBoundMs: number;
  /** `lease.assume_synchronized_clocks`: the operator's acknowledgement that makes `skew_bound: 0s` acceptable. */
  readonly assumeSynchronizedClocks: boolean;
}

/**
 * The validated, frozen provisioner configuration. Property names are the YAML keys in camelCase;
 * durations are milliseconds. Secrets are plain properties, but `toJSON()`, `redacted()` and
 * `util.inspect` replace every set secret with "[redacted]" so logging the object never leaks.
 */
export interface ProvisionerConfig {
  /** Max concurrent provisions per invocation (Go: worker goroutines; default CPU count). */
  readonly workers: number;
  readonly intervalMs: number;
  readonly logfile: string | undefined;
  readonly loglevel: LogLevel;
  /** Helper command line, split shell-style; exactly one of `helper` / `helperFunction` is set. */
  readonly helper: string | undefined;
  /** Lambda function name or ARN of a helper run through Lambda Invoke. */
  readonly helperFunction: string | undefined;
  readonly helperTimeoutMs: number;
  readonly token: string | undefined;
  readonly lifecycleComponent: string;
  readonly choriaInsecure: boolean;
  readonly site: string;
  readonly monitorPort: number;
  readonly brokerPort: number;
  readonly brokerProvisioningPassword: string | undefined;
  readonly certDenyList: readonly string[];
  readonly jwtVerifyCert: string | undefined;
  /** A file path, or the key material itself when it came from a secret store. */
  readonly jwtSigningKey: string | undefined;
  readonly jwtSigningToken: string | undefined;
  readonly serverJwtValidityMs: number;
  readonly regoPolicy: string | undefined;
  readonly leaderElection: boolean;
  readonly upgradesRepository: string | undefined;
  readonly upgradesOptional: boolean;
  readonly features: FeatureFlags;
  readonly brokerUrls: readonly string[];
  /** Provisioner identity, used as senderid; constant per site so node locks survive failover. */
  readonly identity: string;
  /** v1 callerid (`choria=<identity>` unless set); v2 uses the client JWT's callerid claim. */
  readonly callerid: string;
  readonly protocolVersion: 1 | 2;
  readonly clientJwt: string | undefined;
  readonly clientSeed: string | undefined;
  readonly tls: TlsSettings;
  readonly natsToken: string | undefined;
  readonly deploymentId: string;
  readonly lease: LeaseSettings;
  /** `discovery_max_nodes`: identities one discovery admits at most; replies beyond it are dropped, logged and counted. */
  readonly discoveryMaxNodes: number;
  /** Request TTL in seconds written into every Choria request envelope. */
  readonly rpcTtl: number;
  readonly discoveryTimeoutMs: number;
  /** Plain object of the YAML keys with every set secret replaced by "[redacted]". */
  redacted(): Record<string, unknown>;
  toJSON(): Record<string, unknown>;
}

export const REDACTED = "[redacted]";

export const DEFAULT_CERT_DENY_LIST: readonly string[] = Object.freeze([
  "\\.privileged.mcollective$",
  "\\.privileged.choria$",
  "\\.mcollective$",
  "\\.choria$",
]);

export interface ParseConfigOptions {
  /** Receives one warning per unknown key (the Go daemon ignores them silently). */
  logger?: Logger;
  /** Environment used for defaults that depend on the deployment (`AWS_REGION`). */
  env?: Record<string, string | undefined>;
}

const MINUTE_MS = 60_000;
const DEFAULT_LIFECYCLE_COMPONENT = "provision_mode_server";
/**
 * Sized for large real fleets: a whole data centre (tens of thousands of nodes) booting into
 * provisioning mode is admitted over a few discoveries; a hostile client forging replies cannot
 * make one discovery produce more work than this.
 */
export const DEFAULT_DISCOVERY_MAX_NODES = 10_000;
/** One NATS subject token: no separators, wildcards, whitespace or control characters. */
const SUBJECT_TOKEN_PROBLEM = /[.>*\s\p{Cc}]/u;
const BROKER_URL = /^(nats|tls):\/\/[^\s/]+$/;

/**
 * Validates a parsed YAML document into a ProvisionerConfig. Synchronous: secret references
 * (`ssm:`/`secretsmanager:`) are kept as written; `loadConfig` resolves them first.
 */
export function parseConfig(raw: unknown, options: ParseConfigOptions = {}): ProvisionerConfig {
  const document = dropNulls(raw ?? {});
  if (!isPlainObject(document)) {
    throw new ConfigError("(root)", "the configuration must be a YAML mapping");
  }
  warnUnknownKeys(document, options.logger);

  const result = rawConfigSchema.safeParse(document);
  if (!result.success) throw configErrorFrom(result.error);
  return buildConfig(result.data, options.env ?? process.env);
}

function buildConfig(raw: RawConfig, env: Record<string, string | undefined>): ProvisionerConfig {
  const lifecycleComponent = nonEmpty(raw.lifecycle_component) ?? DEFAULT_LIFECYCLE_COMPONENT;
  // It becomes one token of choria.lifecycle.event.startup.<component>: a wildcard would subscribe to
  // every component's events, and a space or separator makes an invalid or different subject.
  if (SUBJECT_TOKEN_PROBLEM.test(lifecycleComponent)) {
    throw new ConfigError("lifecycle_component", "must be one NATS subject token: no '.', '>', '*', whitespace or control characters");
  }

  const intervalMs = duration("interval", raw.interval ?? "1m");
  if (intervalMs < MINUTE_MS) {
    throw new ConfigError("interval", "is too small, the minimum is 1 minute (for example 10m or 1h)");
  }
  const serverJwtValidityMs = nonEmpty(raw.server_jwt_validity)
    ? positiveDuration("server_jwt_validity", raw.server_jwt_validity ?? "")
    : 365 * 24 * 60 * MINUTE_MS;

  const requested = raw.features ?? {};
  if (requested.pki && requested.ed25519) {
    throw new ConfigError("features.ed25519", "only one of features.pki or features.ed25519 can be enabled");
  }
  // As in the Go daemon, ed25519 switches jwt on rather than rejecting the combination.
  const features: FeatureFlags = Object.freeze({
    pki: requested.pki ?? false,
    jwt: (requested.jwt ?? false) || (requested.ed25519 ?? false),
    ed25519: requested.ed25519 ?? false,
    upgrades: requested.upgrades ?? false,
  });
  const upgradesRepository = nonEmpty(raw.upgrades_repository);
  // Go refuses this only when a host is upgraded; with upgrades_optional it sends an empty
  // repository and carries on when the update fails, so only the mandatory case is refused here.
  if (features.upgrades && !upgradesRepository && !(raw.upgrades_optional ?? false)) {
    throw new ConfigError("upgrades_repository", "is required when features.upgrades is enabled and upgrades_optional is not");
  }

  const helper = nonEmpty(raw.helper);
  const helperFunction = nonEmpty(raw.helper_function);
  if (helper && helperFunction) {
    throw new ConfigError("helper_function", "set only one of helper or helper_function");
  }
  if (!helper && !helperFunction) {
    throw new ConfigError("helper", "is required (or set helper_function)");
  }

  const brokerUrls = (raw.broker_urls ?? []).map((url) => url.trim()).filter((url) => url !== "");
  if (brokerUrls.length === 0) throw new ConfigError("broker_urls", "at least one broker URL is required");
  brokerUrls.forEach((url, index) => {
    if (!BROKER_URL.test(url)) {
      throw new ConfigError(`broker_urls.${index}`, `"${url}" is not a nats:// or tls:// URL with host and port`);
    }
  });

  const protocolVersion = raw.protocol_version ?? 1;
  const clientJwt = nonEmpty(raw.client_jwt);
  const clientSeed = nonEmpty(raw.client_seed);
  if (protocolVersion === 2 && !clientJwt) throw new ConfigError("client_jwt", "is required with protocol_version 2");
  if (protocolVersion === 2 && !clientSeed) throw new ConfigError("client_seed", "is required with protocol_version 2");

  const lease: LeaseSettings = Object.freeze({
    durationMs: positiveDuration("lease.duration", raw.lease?.duration ?? "30s"),
    renewIntervalMs: positiveDuration("lease.renew_interval", raw.lease?.renew_interval ?? "10s"),
    skewBoundMs: nonNegativeDuration("lease.skew_bound", raw.lease?.skew_bound ?? "5s"),
    assumeSynchronizedClocks: raw.lease?.assume_synchronized_clocks ?? false,
  });
  // With no skew bound the lease is safe only if every deployment's clock agrees exactly; no real
  // fleet has that, so it takes an explicit statement that the operator accepts it.
  if (lease.skewBoundMs === 0 && !lease.assumeSynchronizedClocks) {
    throw new ConfigError(
      "lease.skew_bound",
      "0s means two deployments whose clocks differ at all can both hold the lease; set a bound above the worst clock offset, or set lease.assume_synchronized_clocks: true to accept that risk",
    );
  }
  if (lease.renewIntervalMs + lease.skewBoundMs >= lease.durationMs) {
    throw new ConfigError("lease.renew_interval", "renew_interval plus skew_bound must be shorter than lease.duration");
  }
  // The gate opens only when the lease's remaining validity covers the next attempt, so a lease
  // shorter than the longest choria_provision attempt would keep every deployment paused.
  const longestAttemptMs = Math.max(...Object.values(RPC_PLAN).map((rpc) => rpc.timeoutMs));
  if ((raw.leader_election ?? false) && lease.durationMs - lease.skewBoundMs < longestAttemptMs) {
    throw new ConfigError(
      "lease.duration",
      `lease.duration minus lease.skew_bound must cover the longest RPC attempt (${longestAttemptMs / 1000} s), or the pause gate never opens`,
    );
  }
  const helperTimeoutMs = positiveDuration("helper_timeout", raw.helper_timeout ?? "10s");
  // The helper runs under the gate like an RPC attempt: one that cannot fit a validity never runs.
  if ((raw.leader_election ?? false) && helperTimeoutMs > lease.durationMs - lease.skewBoundMs) {
    throw new ConfigError(
      "helper_timeout",
      `must fit in one lease validity (lease.duration minus lease.skew_bound = ${(lease.durationMs - lease.skewBoundMs) / 1000} s), or every host pauses at the helper step`,
    );
  }

  const site = raw.site ?? "";
  const identity = nonEmpty(raw.identity) ?? `choria_provisioner.${site || "default"}`;
  // The identity is the senderid nodes see and part of the subjects the provisioner uses.
  if (/[>*\s\p{Cc}]/u.test(identity)) {
    throw new ConfigError("identity", `"${identity.slice(0, 100)}" must not contain '>', '*', whitespace or control characters`);
  }
  const certDenyList = raw.cert_deny_list && raw.cert_deny_list.length > 0 ? raw.cert_deny_list : DEFAULT_CERT_DENY_LIST;
  certDenyList.forEach((pattern, index) => checkPattern(pattern, index));

  const config = {
    workers: raw.workers || availableParallelism(),
    intervalMs,
    logfile: nonEmpty(raw.logfile),
    loglevel: (nonEmpty(raw.loglevel) ?? "info") as LogLevel,
    helper,
    helperFunction,
    helperTimeoutMs,
    token: nonEmpty(raw.token),
    lifecycleComponent,
    choriaInsecure: raw.choria_insecure ?? false,
    site,
    monitorPort: raw.monitor_port ?? 0,
    brokerPort: raw.broker_port ?? 0,
    brokerProvisioningPassword: nonEmpty(raw.broker_provisioning_password),
    certDenyList: Object.freeze([...certDenyList]),
    jwtVerifyCert: nonEmpty(raw.jwt_verify_cert),
    jwtSigningKey: nonEmpty(raw.jwt_signing_key),
    jwtSigningToken: nonEmpty(raw.jwt_signing_token),
    serverJwtValidityMs,
    regoPolicy: nonEmpty(raw.rego_policy),
    leaderElection: raw.leader_election ?? false,
    upgradesRepository,
    upgradesOptional: raw.upgrades_optional ?? false,
    features,
    brokerUrls: Object.freeze(brokerUrls),
    identity,
    callerid: nonEmpty(raw.callerid) ?? `choria=${identity}`,
    protocolVersion,
    clientJwt,
    clientSeed,
    tls: Object.freeze({
      ca: nonEmpty(raw.tls?.ca),
      cert: nonEmpty(raw.tls?.cert),
      key: nonEmpty(raw.tls?.key),
      insecureSkipVerify: raw.tls?.insecure_skip_verify ?? false,
    }),
    natsToken: nonEmpty(raw.nats_token),
    deploymentId: nonEmpty(raw.deployment_id) ?? nonEmpty(env.AWS_REGION) ?? "local",
    lease,
    discoveryMaxNodes: raw.discovery_max_nodes ?? DEFAULT_DISCOVERY_MAX_NODES,
    rpcTtl: raw.rpc_ttl ?? 30,
    discoveryTimeoutMs: positiveDuration("discovery_timeout", raw.discovery_timeout ?? "2s"),
  };
  return freezeWithRedaction(config);
}

type ConfigValues = Omit<ProvisionerConfig, "redacted" | "toJSON">;

function freezeWithRedaction(values: ConfigValues): ProvisionerConfig {
  const redacted = (): Record<string, unknown> => redactedView(values);
  const config = Object.defineProperties(
    { ...values },
    {
      redacted: { value: redacted, enumerable: false },
      toJSON: { value: redacted, enumerable: false },
      [Symbol.for("nodejs.util.inspect.custom")]: { value: redacted, enumerable: false },
    },
  );
  return Object.freeze(config) as ProvisionerConfig;
}

/** The YAML-keyed view used for logs; secrets that are set become "[redacted]". */
function redactedView(c: ConfigValues): Record<string, unknown> {
  const view: Record<string, unknown> = {
    workers: c.workers,
    interval: `${c.intervalMs}ms`,
    logfile: c.logfile,
    loglevel: c.loglevel,
    helper: c.helper,
    helper_function: c.helperFunction,
    helper_timeout: `${c.helperTimeoutMs}ms`,
    token: c.token,
    lifecycle_component: c.lifecycleComponent,
    choria_insecure: c.choriaInsecure,
    site: c.site,
    monitor_port: c.monitorPort,
    broker_port: c.brokerPort,
    broker_provisioning_password: c.brokerProvisioningPassword,
    cert_deny_list: [...c.certDenyList],
    jwt_verify_cert: c.jwtVerifyCert,
    jwt_signing_key: c.jwtSigningKey,
    jwt_signing_token: c.jwtSigningToken,
    server_jwt_validity: `${c.serverJwtValidityMs}ms`,
    rego_policy: c.regoPolicy,
    leader_election: c.leaderElection,
    upgrades_repository: c.upgradesRepository,
    upgrades_optional: c.upgradesOptional,
    features: { ...c.features },
    broker_urls: [...c.brokerUrls],
    identity: c.identity,
    callerid: c.callerid,
    protocol_version: c.protocolVersion,
    client_jwt: c.clientJwt,
    client_seed: c.clientSeed,
    tls: { ca: c.tls.ca, cert: c.tls.cert, key: c.tls.key, insecure_skip_verify: c.tls.insecureSkipVerify },
    nats_token: c.natsToken,
    deployment_id: c.deploymentId,
    lease: {
      duration: `${c.lease.durationMs}ms`,
      renew_interval: `${c.lease.renewIntervalMs}ms`,
      skew_bound: `${c.lease.skewBoundMs}ms`,
      assume_synchronized_clocks: c.lease.assumeSynchronizedClocks,
    },
    discovery_max_nodes: c.discoveryMaxNodes,
    rpc_ttl: c.rpcTtl,
    discovery_timeout: `${c.discoveryTimeoutMs}ms`,
  };
  for (const key of SECRET_KEYS) {
    if (view[key] !== undefined) view[key] = REDACTED;
  }
  if (c.tls.key !== undefined) (view.tls as Record<string, unknown>).key = REDACTED;
  return view;
}

/** Every secret value set in the configuration, for value-based masking in log output. */
export function secretValues(config: ProvisionerConfig): string[] {
  const values = [
    config.token,
    config.brokerProvisioningPassword,
    config.jwtSigningKey,
    config.jwtSigningToken,
    config.natsToken,
    config.clientJwt,
    config.clientSeed,
    config.tls.key,
  ];
  return values.filter((value): value is string => typeof value === "string" && value !== "");
}

function duration(key: string, text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    if (error instanceof DurationError) throw new ConfigError(key, error.message, { cause: error });
    throw error;
  }
}

function positiveDuration(key: string, text: string): number {
  const ms = duration(key, text);
  if (ms <= 0) throw new ConfigError(key, "must be a positive duration");
  return ms;
}

function nonNegativeDuration(key: string, text: string): number {
  const ms = duration(key, text);
  if (ms < 0) throw new ConfigError(key, "must not be negative");
  return ms;
}

function checkPattern(pattern: string, index: number): void {
  try {
    new RegExp(pattern.replace(/^\/+|\/+$/g, ""));
  } catch (error) {
    throw new ConfigError(`cert_deny_list.${index}`, `"${pattern}" is not a valid regular expression`, { cause: error });
  }
}

function configErrorFrom(error: z.ZodError): ConfigError {
  const issue = error.issues[0];
  const key = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(root)";
  return new ConfigError(key, issue?.message ?? "invalid value", { cause: error });
}

function warnUnknownKeys(document: Record<string, unknown>, logger: Logger | undefined): void {
  if (!logger) return;
  for (const key of Object.keys(document)) {
    if (!TOP_LEVEL_KEYS.includes(key)) {
      logger.warn("ignoring unknown configuration key", { key });
      continue;
    }
    const nestedKeys = NESTED_SECTIONS[key];
    const section = document[key];
    if (nestedKeys && isPlainObject(section)) {
      for (const nested of Object.keys(section)) {
        if (!nestedKeys.includes(nested)) logger.warn("ignoring unknown configuration key", { key: `${key}.${nested}` });
      }
    }
  }
}

/** YAML `key:` with no value is null; Go leaves the field at its zero value, so drop it. */
function dropNulls(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  const result: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(value)) {
    if (entry !== null) result[key] = dropNulls(entry);
  }
  return result;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
