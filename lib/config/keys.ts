/**
 * THE table of configuration keys: the Go daemon's YAML keys plus the serverless build's. Each row
 * says, for one key, the shape and default of its YAML value, whether `PROVISIONER_<KEY>` may set it,
 * whether it is a secret, whether it may be an `ssm:` / `secretsmanager:` reference, and how the
 * redacted view shows it. Everything else is derived from it: the zod schema (schema.ts), the
 * environment overrides (load.ts), the redacted view and `secretValues()` (config.ts), `SECRET_KEYS`,
 * `REFERENCE_SETTINGS` (secrets.ts), and docs/configuration.md is tested
 * against it. Adding a key is one row here, its field in types.ts and where it is built (config.ts,
 * or sections.ts for the lease and renew sections).
 */
import * as z from "zod";
import { DEFAULT_CERT_DENY_LIST } from "../crypto/csr";
import { LEASE_DEFAULTS } from "../lease/settings";
import { formatDuration } from "./duration";
import type { ProvisionerConfig } from "./types";

/** How the text of `PROVISIONER_<KEY>` is read; top-level scalars and lists only. */
export type EnvKind = "string" | "boolean" | "integer" | "list";

type ConfigValues = Omit<ProvisionerConfig, "redacted" | "toJSON">;

export interface KeySpec<S extends z.ZodType = z.ZodType> {
  /** The YAML value: its type, and its default (`.default`) when the key is left out. */
  readonly schema: S;
  /** The default as docs/configuration.md states it, when `parseConfig` computes it from other keys. */
  readonly computedDefault?: string;
  readonly env?: EnvKind;
  /** A credential: every rendering of the config shows "[redacted]" and log output masks its value. */
  readonly secret?: true;
  /**
   * May be written as a secret reference: `value` resolves to the setting's value; `material` is a
   * key or certificate file setting (as in the Go daemon) whose reference resolves to the PEM itself.
   */
  readonly reference?: "value" | "material";
  /**
   * Which functions resolve the reference (lib/config/secrets.ts FUNCTION_SETTINGS), hence whose IAM
   * role may read it: `broker`, every function that connects to the broker; `provisioning`, only
   * `provision`, which configures nodes. Required with `reference`.
   */
  readonly usedBy?: "broker" | "provisioning";
  /** The configured value as the redacted view (logs) shows it, before secrets are masked. */
  readonly shown: (config: ConfigValues) => unknown;
  /**
   * A Go key accepted so a Go configuration loads, with no effect here: what this build does
   * instead, which start-up warns and check-config notes when the key is set.
   */
  readonly ignored?: string;
  /**
   * What the value measures, so every message about the key says it: `duration` for a Go-style
   * duration string (`30s`, `5m`), or the singular and plural of what a number counts.
   */
  readonly unit?: Unit;
}

export type Unit = "duration" | readonly [one: string, many: string];

type SectionShape<K extends Record<string, KeySpec>> = { -readonly [N in keyof K]: K[N]["schema"] };

export interface SectionSpec<K extends Record<string, KeySpec> = Record<string, KeySpec>> {
  readonly section: K;
  readonly schema: z.ZodPrefault<z.ZodObject<SectionShape<K>>>;
}

function key<const T extends KeySpec>(spec: T): T {
  return spec;
}

/** A nested mapping (`lease:`); left out, its keys take their defaults. */
function section<const K extends Record<string, KeySpec>>(keys: K): SectionSpec<K> {
  const shape = Object.fromEntries(Object.entries(keys).map(([name, spec]) => [name, spec.schema])) as SectionShape<K>;
  return { section: keys, schema: z.object(shape).prefault({} as never) };
}

/** As the Go daemon's zero value: an empty string (or list) is the same as leaving the key out. */
const emptyIsUnset = <S extends z.ZodType>(schema: S) =>
  z.preprocess((value) => (value === "" || (Array.isArray(value) && value.length === 0) ? undefined : value), schema);

const text = z.string();
/** A string setting with no default: unset, or set to "", it is undefined. */
const optionalText = emptyIsUnset(text.optional());
/**
 * The request TTL is also the lease's delivery horizon: a takeover waits it out past the expiry,
 * so a TTL of hours would leave a site without a leader for hours after a crash.
 */
const MAX_RPC_TTL_SECONDS = 300;
const flag = z.boolean();
const port = z.number().int().min(0).max(65535);
/** Durations are strings parsed by `parseDuration`; an empty one is 0s, as in Go. */
const duration = (fallback: string) => text.default(fallback);
const DURATION = "duration";
const SECONDS = ["second", "seconds"] as const;
const HOSTS = ["host", "hosts"] as const;

/** `renew.windows` and `renew.freezes`: when renewal may, or may not, send (lib/config/renew-calendar.ts). */
// Loose: a key an entry does not take is named by renew-control.ts with every other problem of the list.
const calendarEntries = emptyIsUnset(z.array(z.looseObject({ cron: text, timezone: text.optional(), duration: text })).optional());
const shownEntry = (entry: ProvisionerConfig["renew"]["windows"][number]) => ({ cron: entry.cron.text, timezone: entry.timezone, duration: entry.duration });

const DEFAULT_LIFECYCLE_COMPONENT = "provision_mode_server";
/**
 * Sized for large real fleets: a whole data centre (tens of thousands of nodes) booting into
 * provisioning mode is admitted over a few discoveries; a hostile client forging replies cannot
 * make one discovery produce more work than this.
 */
const DEFAULT_DISCOVERY_MAX_NODES = 10_000;
/**
 * Hosts one provision invocation works on at once. Not Go's CPU count, the default of a daemon on one
 * box: an invocation's hosts mostly wait on node round trips and the helper, its batch is ten
 * messages, and Lambda bills wall time (at 512 MB, availableParallelism() says 2).
 */
export const DEFAULT_WORKERS = 10;

export const CONFIG_KEYS = {
  workers: key({ schema: z.number().int().min(0).default(DEFAULT_WORKERS), unit: HOSTS, env: "integer", shown: (c) => c.workers }),
  interval: key({ schema: duration("1m"), unit: DURATION, env: "string", shown: (c) => formatDuration(c.intervalMs) }),
  logfile: key({
    schema: optionalText,
    env: "string",
    shown: (c) => c.logfile,
    ignored: "the functions log JSON to CloudWatch Logs, one log group per function; loglevel sets the level",
  }),
  loglevel: key({ schema: emptyIsUnset(z.enum(["debug", "info", "warn", "error"]).default("info")), env: "string", shown: (c) => c.loglevel }),
  helper: key({ schema: optionalText, env: "string", shown: (c) => c.helper }),
  helper_function: key({ schema: optionalText, env: "string", shown: (c) => c.helperFunction }),
  helper_timeout: key({ schema: duration("10s"), unit: DURATION, env: "string", shown: (c) => formatDuration(c.helperTimeoutMs) }),
  token: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "provisioning", shown: (c) => c.token }),
  lifecycle_component: key({ schema: emptyIsUnset(text.default(DEFAULT_LIFECYCLE_COMPONENT)), env: "string", shown: (c) => c.lifecycleComponent }),
  // go-choria keeps the lifecycle events in its choria account's CHORIA_EVENTS stream; the provisioning account has no JetStream.
  lifecycle_broker_urls: key({ schema: z.array(text).optional(), env: "list", shown: (c) => [...c.lifecycleBrokerUrls] }),
  choria_insecure: key({ schema: flag.default(false), env: "boolean", shown: (c) => c.choriaInsecure }),
  site: key({ schema: text.default(""), env: "string", shown: (c) => c.site }),
  monitor_port: key({
    schema: port.default(0),
    env: "integer",
    shown: (c) => c.monitorPort,
    ignored: "no Prometheus listener is started; the same metrics go to CloudWatch (EMF) and the stack's dashboard",
  }),
  broker_port: key({
    schema: port.default(0),
    env: "integer",
    shown: (c) => c.brokerPort,
    ignored: "the Go daemon does not use it either; the provisioner connects to the brokers in broker_urls",
  }),
  broker_provisioning_password: key({
    schema: optionalText,
    env: "string",
    secret: true,
    reference: "value",
    usedBy: "broker",
    shown: (c) => c.brokerProvisioningPassword,
  }),
  cert_deny_list: key({ schema: emptyIsUnset(z.array(text).default([...DEFAULT_CERT_DENY_LIST])), shown: (c) => [...c.certDenyList] }),
  jwt_verify_cert: key({ schema: optionalText, env: "string", reference: "material", usedBy: "provisioning", shown: (c) => c.jwtVerifyCert }),
  jwt_signing_key: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "provisioning", shown: (c) => c.jwtSigningKey }),
  jwt_signing_token: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "provisioning", shown: (c) => c.jwtSigningToken }),
  server_jwt_validity: key({ schema: emptyIsUnset(duration("1y")), unit: DURATION, env: "string", shown: (c) => formatDuration(c.serverJwtValidityMs) }),
  ledger_retention: key({ schema: emptyIsUnset(duration("400d")), unit: DURATION, env: "string", shown: (c) => formatDuration(c.ledgerRetentionMs) }),
  rego_policy: key({
    schema: optionalText,
    env: "string",
    shown: (c) => c.regoPolicy,
    ignored:
      "no policy is enforced (the Go daemon does not read it either): which clients may provision is decided by the broker's provisioning account (broker_provisioning_password) and its permissions, and who may run the operator's commands by AWS IAM (docs/deploy.md)",
  }),
  leader_election: key({ schema: flag.default(false), env: "boolean", shown: (c) => c.leaderElection }),
  upgrades_repository: key({ schema: optionalText, env: "string", shown: (c) => c.upgradesRepository }),
  upgrades_optional: key({ schema: flag.default(false), env: "boolean", shown: (c) => c.upgradesOptional }),
  features: section({
    pki: key({ schema: flag.default(false), shown: (c) => c.features.pki }),
    jwt: key({ schema: flag.default(false), shown: (c) => c.features.jwt }),
    ed25519: key({ schema: flag.default(false), shown: (c) => c.features.ed25519 }),
    upgrades: key({ schema: flag.default(false), shown: (c) => c.features.upgrades }),
  }),
  broker_urls: key({ schema: z.array(text).optional(), env: "list", shown: (c) => [...c.brokerUrls] }),
  identity: key({ schema: optionalText, computedDefault: '`choria_provisioner.<site or "default">`', env: "string", shown: (c) => c.identity }),
  callerid: key({ schema: optionalText, computedDefault: "`choria=<identity>`", env: "string", shown: (c) => c.callerid }),
  protocol_version: key({ schema: z.union([z.literal(1), z.literal(2)]).default(1), env: "integer", shown: (c) => c.protocolVersion }),
  client_jwt: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "broker", shown: (c) => c.clientJwt }),
  client_seed: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "broker", shown: (c) => c.clientSeed }),
  tls: section({
    ca: key({ schema: optionalText, reference: "material", usedBy: "broker", shown: (c) => c.tls.ca }),
    cert: key({ schema: optionalText, reference: "material", usedBy: "broker", shown: (c) => c.tls.cert }),
    key: key({ schema: optionalText, secret: true, reference: "material", usedBy: "broker", shown: (c) => c.tls.key }),
    insecure_skip_verify: key({ schema: flag.default(false), shown: (c) => c.tls.insecureSkipVerify }),
  }),
  nats_token: key({ schema: optionalText, env: "string", secret: true, reference: "value", usedBy: "broker", shown: (c) => c.natsToken }),
  deployment_id: key({
    schema: optionalText,
    computedDefault: "the stack's `<stage>/<Region>/<account>` (`STACK_DEPLOYMENT_ID`, set by serverless.yml); required with `leader_election` elsewhere; `local` without election",
    env: "string",
    shown: (c) => c.deploymentId,
  }),
  lease: section({
    duration: key({ schema: duration(formatDuration(LEASE_DEFAULTS.leaseDurationMs)), unit: DURATION, shown: (c) => formatDuration(c.lease.durationMs) }),
    renew_interval: key({ schema: duration(formatDuration(LEASE_DEFAULTS.keepIntervalMs)), unit: DURATION, shown: (c) => formatDuration(c.lease.keepIntervalMs) }),
    skew_bound: key({ schema: duration(formatDuration(LEASE_DEFAULTS.skewBoundMs)), unit: DURATION, shown: (c) => formatDuration(c.lease.skewBoundMs) }),
    assume_synchronized_clocks: key({ schema: flag.default(false), shown: (c) => c.lease.assumeSynchronizedClocks }),
    peers: key({ schema: emptyIsUnset(z.array(text).optional()), computedDefault: "none", shown: (c) => [...c.lease.peers] }),
  }),
  discovery_max_nodes: key({
    schema: z.number().int().min(1).default(DEFAULT_DISCOVERY_MAX_NODES),
    unit: ["identity", "identities"],
    env: "integer",
    shown: (c) => c.discoveryMaxNodes,
  }),
  // By default the pacer (discovery_backlog), not this budget, bounds what a booting fleet gets in:
  // a discovery that left names out continues at once (lib/app/discovery-continuation.ts).
  discovery_new_names_per_interval: key({
    schema: z.number().int().min(1).optional(),
    computedDefault: "`discovery_max_nodes`",
    unit: ["new name", "new names"],
    env: "integer",
    shown: (c) => c.discoveryNewNamesPerInterval,
  }),
  allow_short_identities: key({ schema: flag.default(false), env: "boolean", shown: (c) => c.allowShortIdentities }),
  renew: section({
    enabled: key({ schema: flag.default(false), shown: (c) => c.renew.enabled }),
    before: key({ schema: emptyIsUnset(text.default("20%")), shown: (c) => ("ms" in c.renew.before ? formatDuration(c.renew.before.ms) : `${c.renew.before.fraction * 100}%`) }),
    rate: key({ schema: z.number().int().min(1).default(10), unit: ["request a minute", "requests a minute"], shown: (c) => c.renew.ratePerMinute }),
    // Renewal keeps the hosts in flight in one DynamoDB item (400 KB), about 100 bytes each.
    max_in_flight: key({ schema: z.number().int().min(1).max(2_000).default(50), unit: HOSTS, shown: (c) => c.renew.maxInFlight }),
    failure_threshold: key({ schema: z.number().int().min(0).default(5), unit: ["failed renewal", "failed renewals"], shown: (c) => c.renew.failureThreshold }),
    failure_window: key({ schema: z.number().int().min(1).default(20), unit: ["renewal", "renewals"], shown: (c) => c.renew.failureWindow }),
    timeout: key({ schema: duration("15m"), unit: DURATION, shown: (c) => formatDuration(c.renew.timeoutMs) }),
    broker_urls: key({ schema: z.array(text).optional(), shown: (c) => [...c.renew.brokerUrls] }),
    collective: key({ schema: optionalText, computedDefault: "`choria` with protocol_version 2, else `mcollective`", shown: (c) => c.renew.collective }),
    windows: key({ schema: calendarEntries, shown: (c) => c.renew.windows.map(shownEntry) }),
    freezes: key({ schema: calendarEntries, shown: (c) => c.renew.freezes.map(shownEntry) }),
    shortest_lifetime: key({ schema: optionalText, unit: DURATION, shown: (c) => (c.renew.shortestLifetimeMs === undefined ? undefined : formatDuration(c.renew.shortestLifetimeMs)) }),
    start_rate: key({ schema: z.number().int().min(1).optional(), unit: ["request a minute", "requests a minute"], shown: (c) => c.renew.slowStart?.startRate }),
    rate_increase: key({ schema: z.number().gt(1).max(10).default(2), shown: (c) => c.renew.slowStart?.increase }),
    successes_per_step: key({ schema: z.number().int().min(1).default(10), unit: ["renewal", "renewals"], shown: (c) => c.renew.slowStart?.successesPerStep }),
    abort_percentage: key({ schema: z.number().gt(0).max(100).optional(), shown: (c) => c.renew.abort?.percentage }),
    abort_min_attempts: key({ schema: z.number().int().min(1).default(100), unit: HOSTS, shown: (c) => c.renew.abort?.minAttempts }),
  }),
  rpc_ttl: key({ schema: z.number().int().min(30).max(MAX_RPC_TTL_SECONDS).default(30), unit: SECONDS, env: "integer", shown: (c) => c.rpcTtl }),
  discovery_timeout: key({ schema: duration("2s"), unit: DURATION, env: "string", shown: (c) => formatDuration(c.discoveryTimeoutMs) }),
  discovery_backlog: key({ schema: duration("4s"), unit: DURATION, env: "string", shown: (c) => formatDuration(c.discoveryBacklogMs) }),
  provisioning_jwt_warning: key({ schema: duration("30d"), unit: DURATION, env: "string", shown: (c) => formatDuration(c.provisioningJwtWarningMs) }),
};

type Table = typeof CONFIG_KEYS;
type TopLevelKey = keyof Table & string;
type SettingOf<K extends TopLevelKey> = Table[K] extends SectionSpec<infer S> ? `${K}.${keyof S & string}` : K;
/** Every key, dotted for nested ones (`lease.duration`). */
export type Setting = { [K in TopLevelKey]: SettingOf<K> }[TopLevelKey];
type SpecOf<P extends Setting> = P extends `${infer S}.${infer N}`
  ? Table[S & TopLevelKey] extends SectionSpec<infer K>
    ? K[N & keyof K]
    : never
  : Table[P & TopLevelKey];

export type SecretKey = { [P in Setting]: SpecOf<P> extends { secret: true } ? P : never }[Setting];
export type ReferenceSetting = { [P in Setting]: SpecOf<P> extends { reference: string } ? P : never }[Setting];

function isSection(spec: KeySpec | SectionSpec): spec is SectionSpec {
  return "section" in spec;
}

/** Every key as `[dotted name, row]`, in table order. */
export const SETTINGS: ReadonlyArray<readonly [Setting, KeySpec]> = Object.entries(CONFIG_KEYS as Record<string, KeySpec | SectionSpec>).flatMap(
  ([name, spec]) =>
    isSection(spec)
      ? Object.entries(spec.section).map(([nested, row]) => [`${name}.${nested}` as Setting, row] as const)
      : [[name as Setting, spec] as const],
);

/** The names of the keys whose row says `has`, in table order. */
export function settingsWhere<P extends Setting>(has: (spec: KeySpec) => boolean): readonly P[] {
  return Object.freeze(SETTINGS.filter(([, spec]) => has(spec)).map(([name]) => name as P));
}

/** Top-level keys and their env kind, for `PROVISIONER_<KEY>`. */
export const ENV_OVERRIDABLE: Readonly<Record<string, EnvKind>> = Object.freeze(
  Object.fromEntries(SETTINGS.flatMap(([name, spec]) => (spec.env ? [[name, spec.env]] : []))),
);

/** The YAML-keyed view of a configuration, every set secret replaced by `masked`. */
export function configView(config: ConfigValues, masked: string): Record<string, unknown> {
  const view: Record<string, unknown> = {};
  for (const [name, spec] of SETTINGS) {
    const shown = spec.shown(config);
    const value = spec.secret && shown !== undefined ? masked : shown;
    const [top, nested] = name.split(".", 2) as [string, string | undefined];
    if (nested === undefined) view[top] = value;
    else view[top] = { ...(view[top] as Record<string, unknown> | undefined), [nested]: value };
  }
  return view;
}

/** The values of every set secret, for value-based masking in log output. */
export function secretValues(config: ConfigValues): string[] {
  return SETTINGS.filter(([, spec]) => spec.secret)
    .map(([, spec]) => spec.shown(config))
    .filter((value): value is string => typeof value === "string" && value !== "");
}
