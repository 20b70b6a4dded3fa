/** The typed ProvisionerConfig: a YAML document parsed and validated into it, every problem reported in one run, and the lease gate's settings it gives. */
import { ConfigError, ConfigProblemsError } from "../errors";
import { resolveLeaseSettings, type LeaseSettings } from "../lease/settings";
import { REDACTED } from "../observability/redact";
import type { Logger } from "../ports/logger";
import { deploymentIdOf } from "./deployment";
import { duration, nonNegativeDuration, positiveDuration } from "./duration-settings";
import { configView, DEFAULT_WORKERS } from "./keys";
import { ProblemCollector, schemaProblem } from "./problems";
import { dropNulls, isPlainObject, warnIgnoredKeys, warnRiskySettings, warnUnknownKeys } from "./raw-document";
import { NESTED_SECTIONS, rawConfigSchema, type RawConfig } from "./schema";
import { parseSecretReference } from "./secrets";
import { BROKER_URL, helperTimeoutOf, leaseSectionOf, renewSection } from "./sections";
import { MATERIAL_OR_PATH, describeShape, looksLikePath } from "./shapes";
import type { FeatureFlags, ProvisionerConfig } from "./types";

export interface ParseConfigOptions {
  /** Receives one warning per unknown key (the Go daemon ignores them silently). */
  logger?: Logger;
  /** Environment used for defaults that depend on the deployment (`AWS_REGION`). */
  env?: Record<string, string | undefined>;
}

const MINUTE_MS = 60_000;
/** A new-names budget over the cap loads (a discovery never keeps more than the cap), but not silently. */
function warnClampedBudget(raw: RawConfig, logger: Logger | undefined): void {
  const budget = raw.discovery_new_names_per_interval;
  if (budget === undefined || budget <= raw.discovery_max_nodes) return;
  logger?.warn("discovery_new_names_per_interval is over discovery_max_nodes; the cap applies", {
    setting: "discovery_new_names_per_interval",
    detail: `${budget} new names a discovery: at most discovery_max_nodes (${raw.discovery_max_nodes}) are admitted; leave it unset for the cap, or raise the cap`,
  });
}

/** One NATS subject token: no separators, wildcards, whitespace or control characters. */
const SUBJECT_TOKEN_PROBLEM = /[.>*\s\p{Cc}]/u;

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
  warnIgnoredKeys(document, options.logger);
  warnRiskySettings(document, options.logger);
  const env = options.env ?? process.env;

  // Validate, and again with each offending key set aside, so one run reports every problem.
  const collector = new ProblemCollector(NESTED_SECTIONS);
  let candidate: Record<string, unknown> | undefined = document;
  while (candidate !== undefined) {
    const result = rawConfigSchema.safeParse(candidate);
    let errors: ConfigError[];
    if (result.success) {
      try {
        const config = buildConfig(result.data, env);
        if (collector.problems.length === 0) {
          warnClampedBudget(result.data, options.logger);
          return config;
        }
        break;
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        // A rule that finds several problems at once (every bad renewal window) reports each.
        errors = error instanceof ConfigProblemsError ? [...error.problems] : [error];
      }
    } else {
      errors = result.error.issues.map((issue) => schemaProblem(issue, candidate as Record<string, unknown>));
    }
    candidate = collector.next(candidate, errors);
  }
  throw new ConfigProblemsError(collector.problems as [ConfigError, ...ConfigError[]]);
}

function buildConfig(raw: RawConfig, env: Record<string, string | undefined>): ProvisionerConfig {
  // The checks run in this order, and the first that fails is the one reported.
  const lifecycleComponent = lifecycleComponentOf(raw);
  const intervalMs = intervalOf(raw);
  const serverJwtValidityMs = positiveDuration("server_jwt_validity", raw.server_jwt_validity);
  const features = featuresOf(raw);
  const upgradesRepository = upgradesRepositoryOf(raw, features);
  const { helper, helperFunction } = helperOf(raw);
  const brokerUrls = brokerUrlsOf(raw);
  const { protocol_version: protocolVersion, client_jwt: clientJwt, client_seed: clientSeed } = raw;
  checkProtocolV2Credentials(raw);
  const lease = leaseSectionOf(raw);
  const helperTimeoutMs = helperTimeoutOf(raw, lease);
  const site = siteOf(raw);
  const identity = identityOf(raw);
  raw.cert_deny_list.forEach((pattern, index) => checkPattern(pattern, index));
  checkMaterialOrPath("jwt_signing_key", raw.jwt_signing_key);
  checkMaterialOrPath("jwt_signing_token", raw.jwt_signing_token);
  checkMaterialOrPath("tls.key", raw.tls.key);

  const config = {
    // 0 means the default, as it does in Go.
    workers: raw.workers || DEFAULT_WORKERS,
    intervalMs,
    logfile: raw.logfile,
    loglevel: raw.loglevel,
    helper,
    helperFunction,
    helperTimeoutMs,
    token: raw.token,
    lifecycleComponent,
    lifecycleBrokerUrls: Object.freeze(urlsWithoutCredentials("lifecycle_broker_urls", raw.lifecycle_broker_urls)),
    choriaInsecure: raw.choria_insecure,
    site,
    monitorPort: raw.monitor_port,
    brokerPort: raw.broker_port,
    brokerProvisioningPassword: raw.broker_provisioning_password,
    certDenyList: Object.freeze([...raw.cert_deny_list]),
    jwtVerifyCert: raw.jwt_verify_cert,
    jwtSigningKey: raw.jwt_signing_key,
    jwtSigningToken: raw.jwt_signing_token,
    serverJwtValidityMs,
    regoPolicy: raw.rego_policy,
    leaderElection: raw.leader_election,
    upgradesRepository,
    upgradesOptional: raw.upgrades_optional,
    features,
    brokerUrls: Object.freeze(brokerUrls),
    identity,
    callerid: raw.callerid ?? `choria=${identity}`,
    protocolVersion,
    clientJwt,
    clientSeed,
    tls: Object.freeze({ ca: raw.tls.ca, cert: raw.tls.cert, key: raw.tls.key, insecureSkipVerify: raw.tls.insecure_skip_verify }),
    natsToken: raw.nats_token,
    deploymentId: deploymentIdOf(raw, env),
    lease,
    discoveryMaxNodes: raw.discovery_max_nodes,
    // More than the cap would never be admitted anyway (a discovery keeps at most the cap): clamped, not refused, so it still loads.
    discoveryNewNamesPerInterval: Math.min(raw.discovery_new_names_per_interval ?? raw.discovery_max_nodes, raw.discovery_max_nodes),
    allowShortIdentities: raw.allow_short_identities,
    rpcTtl: raw.rpc_ttl,
    discoveryTimeoutMs: positiveDuration("discovery_timeout", raw.discovery_timeout),
    discoveryBacklogMs: nonNegativeDuration("discovery_backlog", raw.discovery_backlog),
    ledgerRetentionMs: positiveDuration("ledger_retention", raw.ledger_retention),
    provisioningJwtWarningMs: positiveDuration("provisioning_jwt_warning", raw.provisioning_jwt_warning),
    renew: renewSection(raw.renew, protocolVersion, features.ed25519 ? serverJwtValidityMs : undefined),
  };
  return freezeWithRedaction(config);
}

/** It becomes one token of choria.lifecycle.event.startup.<component>. */
function lifecycleComponentOf(raw: RawConfig): string {
  // A wildcard would subscribe to every component's events, and a space or separator makes an
  // invalid or different subject.
  if (SUBJECT_TOKEN_PROBLEM.test(raw.lifecycle_component)) {
    throw new ConfigError("lifecycle_component", "must be one NATS subject token: no '.', '>', '*', whitespace or control characters");
  }
  return raw.lifecycle_component;
}

function intervalOf(raw: RawConfig): number {
  const intervalMs = duration("interval", raw.interval);
  if (intervalMs < MINUTE_MS) {
    throw new ConfigError("interval", `must be at least 1m (for example 1m, 5m or 1h); got "${raw.interval}"`);
  }
  return intervalMs;
}

/** pki and ed25519 exclude each other; as in the Go daemon, ed25519 switches jwt on rather than rejecting the combination. */
function featuresOf(raw: RawConfig): FeatureFlags {
  const requested = raw.features;
  if (requested.pki && requested.ed25519) {
    throw new ConfigError("features.ed25519", "only one of features.pki or features.ed25519 can be enabled");
  }
  return Object.freeze({ ...requested, jwt: requested.jwt || requested.ed25519 });
}

/**
 * Go refuses a missing repository only when a host is upgraded; with upgrades_optional it sends an
 * empty repository and carries on when the update fails, so only the mandatory case is refused here.
 */
function upgradesRepositoryOf(raw: RawConfig, features: FeatureFlags): string | undefined {
  if (features.upgrades && !raw.upgrades_repository && !raw.upgrades_optional) {
    throw new ConfigError("upgrades_repository", "is required when features.upgrades is enabled and upgrades_optional is not");
  }
  return raw.upgrades_repository;
}

/** Exactly one of helper and helper_function. */
function helperOf(raw: RawConfig): { helper: string | undefined; helperFunction: string | undefined } {
  const { helper, helper_function: helperFunction } = raw;
  if (helper && helperFunction) {
    throw new ConfigError("helper_function", "set only one of helper or helper_function");
  }
  if (!helper && !helperFunction) {
    throw new ConfigError("helper", "is required (or set helper_function)");
  }
  return { helper, helperFunction };
}

function brokerUrlsOf(raw: RawConfig): string[] {
  const brokerUrls = urlsWithoutCredentials("broker_urls", raw.broker_urls);
  if (brokerUrls.length === 0) throw new ConfigError("broker_urls", "at least one broker URL is required");
  return brokerUrls;
}

/** A list of broker URLs (blank entries dropped), each with host and port and no credentials. */
function urlsWithoutCredentials(key: "broker_urls" | "lifecycle_broker_urls", urls: readonly string[] | undefined): string[] {
  const brokerUrls = (urls ?? []).map((url) => url.trim()).filter((url) => url !== "");
  brokerUrls.forEach((url, index) => {
    // Credentials in the URL would be printed with it (connection errors, status); each has its own
    // secret key, which is redacted everywhere and may be a reference.
    if (url.includes("@")) {
      throw new ConfigError(
        `${key}.${index}`,
        `"${REDACTED}@${url.slice(url.lastIndexOf("@") + 1)}" has credentials before the host; give host and port only: the password has its own key, broker_provisioning_password (a token: nats_token)`,
      );
    }
    if (!BROKER_URL.test(url)) {
      throw new ConfigError(`${key}.${index}`, `"${url}" is not a nats:// or tls:// URL with host and port`);
    }
  });
  return brokerUrls;
}

/** Protocol version 2 signs with the client's JWT and seed: both are required, and the seed must be one. */
function checkProtocolV2Credentials(raw: RawConfig): void {
  if (raw.protocol_version !== 2) return;
  if (!raw.client_jwt) throw new ConfigError("client_jwt", "is required with protocol_version 2");
  if (!raw.client_seed) throw new ConfigError("client_seed", "is required with protocol_version 2");
  checkClientSeed(raw.client_seed);
}

/** With election on the site names the lease item (lib/lease resolveLeaseSettings), which every function reads at start. */
function siteOf(raw: RawConfig): string {
  if (raw.leader_election && raw.site.trim() === "") {
    throw new ConfigError("site", "is required when leader_election is on: the lease is kept per site");
  }
  return raw.site;
}

/** The identity is the senderid nodes see and part of the subjects the provisioner uses. */
function identityOf(raw: RawConfig): string {
  const identity = raw.identity ?? `choria_provisioner.${raw.site || "default"}`;
  if (/[>*\s\p{Cc}]/u.test(identity)) {
    throw new ConfigError("identity", `"${identity.slice(0, 100)}" must not contain '>', '*', whitespace or control characters`);
  }
  return identity;
}

/**
 * A key setting is the material itself or, as in the Go daemon, the path of a file holding it. A
 * value that is neither (a key in another encoding, a pasted JSON) would be read as a path and shown
 * whole in the "could not be read" error: refuse it here, saying only what it looks like.
 */
function checkMaterialOrPath(key: keyof typeof MATERIAL_OR_PATH, value: string | undefined): void {
  const shape = MATERIAL_OR_PATH[key];
  if (value === undefined || !shape || parseSecretReference(value) || shape.accepts(value) || looksLikePath(value)) return;
  throw new ConfigError(key, `is ${describeShape(value)}, which is neither a file path nor ${shape.expected}`);
}

/**
 * `client_seed` is the hex ed25519 seed the v2 requests are signed with. A reference is checked
 * once resolved (`loadConfig` resolves, then parses); the message never quotes the value.
 */
function checkClientSeed(seed: string): void {
  if (parseSecretReference(seed)) return;
  if (!/^[0-9a-fA-F]{64}$/.test(seed.trim())) {
    throw new ConfigError("client_seed", `is ${describeShape(seed)}; expected a hex encoded 32 byte ed25519 seed (64 hexadecimal characters)`);
  }
}

/**
 * The lease gate's settings for this configuration: `lease.*`, and the request TTL as the delivery
 * horizon (a request the old term stamped may still start at a node until its TTL has passed).
 */
export function leaseSettingsOf(config: ProvisionerConfig, options: { roundTimeoutMs?: number } = {}): LeaseSettings {
  return resolveLeaseSettings({
    leaderElection: config.leaderElection,
    site: config.site,
    deploymentId: config.deploymentId,
    leaseDurationMs: config.lease.durationMs,
    keepIntervalMs: config.lease.keepIntervalMs,
    skewBoundMs: config.lease.skewBoundMs,
    deliveryHorizonMs: config.rpcTtl * 1_000,
    knownPeers: config.lease.peers,
    ...(options.roundTimeoutMs !== undefined ? { roundTimeoutMs: options.roundTimeoutMs } : {}),
  });
}

type ConfigValues = Omit<ProvisionerConfig, "redacted" | "toJSON">;

function freezeWithRedaction(values: ConfigValues): ProvisionerConfig {
  const redacted = (): Record<string, unknown> => configView(values, REDACTED);
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

function checkPattern(pattern: string, index: number): void {
  try {
    new RegExp(pattern.replace(/^\/+|\/+$/g, ""));
  } catch (error) {
    throw new ConfigError(`cert_deny_list.${index}`, `"${pattern}" is not a valid regular expression`, { cause: error });
  }
}
