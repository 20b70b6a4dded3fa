/**
 * The shape of the validated configuration, apart from the code that builds it (config.ts) and the
 * key table (keys.ts) that describes it: both depend on these types, and this module on neither.
 */
import type { LogLevel } from "../observability/logger";
import type { CalendarEntry } from "./renew-calendar";

export interface FeatureFlags {
  readonly pki: boolean;
  readonly jwt: boolean;
  readonly ed25519: boolean;
  readonly upgrades: boolean;
}

/** Each is a file path, or the PEM itself when it came from a secret store (lib/app `keyMaterial`). */
interface TlsSettings {
  readonly ca: string | undefined;
  readonly cert: string | undefined;
  readonly key: string | undefined;
  readonly insecureSkipVerify: boolean;
}

/** The `lease` section as configured; `leaseSettingsOf` makes lib/lease's LeaseSettings of it. */
export interface LeaseSection {
  readonly durationMs: number;
  readonly keepIntervalMs: number;
  readonly skewBoundMs: number;
  /** `lease.assume_synchronized_clocks`: the operator's acknowledgement that makes `skew_bound: 0s` acceptable. */
  readonly assumeSynchronizedClocks: boolean;
  /** `lease.peers`: the other deployments expected in this site's lease item; any other one is reported. */
  readonly peers: readonly string[];
}

/** The `renew` section (docs/renewal.md): re-provisioning hosts before their credentials expire. */
export interface RenewSection {
  readonly enabled: boolean;
  /** A fixed lead before expiry, or a fraction of the credentials' lifetime. */
  readonly before: { readonly ms: number } | { readonly fraction: number };
  readonly ratePerMinute: number;
  readonly maxInFlight: number;
  readonly failureThreshold: number;
  readonly failureWindow: number;
  readonly timeoutMs: number;
  /** The main broker the provisioned nodes are on; empty when renewal is off. */
  readonly brokerUrls: readonly string[];
  /** The collective the nodes' choria_provision agent listens on. */
  readonly collective: string;
  /** Maintenance windows: renewal sends only inside one (none: at any time). */
  readonly windows: readonly CalendarEntry[];
  /** Freezes: renewal sends nothing inside one. */
  readonly freezes: readonly CalendarEntry[];
  /** The shortest credentials' lifetime the site issues, when configured: the windows are checked against it. */
  readonly shortestLifetimeMs: number | undefined;
  /** The send rate ramps from `startRate` to `ratePerMinute`, times `increase` every `successesPerStep` renewals that succeed; undefined: no ramp. */
  readonly slowStart: { readonly startRate: number; readonly increase: number; readonly successesPerStep: number } | undefined;
  /** Renewal pauses when `percentage` of a wave's hosts failed, once `minAttempts` were tried; undefined: no such rule. */
  readonly abort: { readonly percentage: number; readonly minAttempts: number } | undefined;
}

/**
 * The validated, frozen provisioner configuration. Property names are the YAML keys in camelCase;
 * durations are milliseconds. Secrets are plain properties, but `toJSON()`, `redacted()` and
 * `util.inspect` replace every set secret with "[redacted]" so logging the object never leaks.
 */
export interface ProvisionerConfig {
  /** Max concurrent provisions per invocation (Go: worker goroutines, default the CPU count; here 10). */
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
  /** Where the ticks read the lifecycle stream, when not on the provisioning connection (`lifecycle_broker_urls`). */
  readonly lifecycleBrokerUrls: readonly string[];
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
  /** How long the issuance ledger keeps a record (`ledger_retention`; DynamoDB's TTL deletes it after). */
  readonly ledgerRetentionMs: number;
  /** `provisioning_jwt_warning`: a provisioning JWT nodes present that expires within this is counted as expiring (docs/audit.md). */
  readonly provisioningJwtWarningMs: number;
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
  readonly lease: LeaseSection;
  /** `discovery_max_nodes`: identities one discovery admits at most; replies beyond it are dropped, logged and counted. */
  readonly discoveryMaxNodes: number;
  /** `discovery_new_names_per_interval`: names unknown to the registry one discovery admits at most. */
  readonly discoveryNewNamesPerInterval: number;
  /** `allow_short_identities`: names without a domain part are admitted instead of quarantined (docs/audit.md). */
  readonly allowShortIdentities: boolean;
  /** Request TTL in seconds written into every Choria request envelope. */
  readonly rpcTtl: number;
  readonly discoveryTimeoutMs: number;
  /** `discovery_backlog`: measured work one discovery keeps waiting in the host-work queue, in ms; 0 admits at once. */
  readonly discoveryBacklogMs: number;
  readonly renew: RenewSection;
  /** Plain object of the YAML keys with every set secret replaced by "[redacted]". */
  redacted(): Record<string, unknown>;
  toJSON(): Record<string, unknown>;
}
