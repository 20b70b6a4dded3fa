/**
 * The small interfaces the domain logic (provision sequence, lease, admission) is written against.
 * Adapters for NATS, DynamoDB, SQS, Lambda and the wall clock implement them; tests drive the same
 * domain code with real services or with injected clocks.
 */

export interface Clock {
  /** Wall-clock epoch milliseconds (callers stamping records floor it to whole ms). Deployments' wall clocks may disagree by up to the skew bound. */
  now(): number;
  /** Monotonic milliseconds; only comparable within one process, never across deployments. */
  monotonic(): number;
  sleep(ms: number): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

export type LogAttributes = Record<string, unknown>;

/** Structured logger; the Powertools logger satisfies it. Never pass secrets in attributes. */
export interface Logger {
  debug(message: string, attributes?: LogAttributes): void;
  info(message: string, attributes?: LogAttributes): void;
  warn(message: string, attributes?: LogAttributes): void;
  error(message: string, attributes?: LogAttributes): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Metric names of the Go provisioner (docs/behaviour.md §7); every emission carries the `site` dimension. */
export const METRIC = {
  paused: "choria_provisioner_paused",
  discovered: "choria_provisioner_discovered",
  eventDiscovered: "choria_provisioner_event_discovered",
  discoverCycles: "choria_provisioner_discover_cycles",
  discoveryErrors: "choria_provisioner_discovery_errors",
  provisionErrors: "choria_provisioner_provision_errors",
  busyWorkers: "choria_provisioner_busy_workers",
  provisioned: "choria_provisioner_provisioned",
  workQueueEntries: "choria_provisioner_work_queue_entries",
  waitingNodes: "choria_provisioner_waiting_nodes",
  rpcTime: "choria_provisioner_rpc_time",
  helperTime: "choria_provisioner_helper_time",
  rpcErrors: "choria_provisioner_rpc_errors",
  helperErrors: "choria_provisioner_helper_errors",
  helperShutdownRequests: "choria_provisioner_helper_shutdown_requests",
} as const;

type MetricName = (typeof METRIC)[keyof typeof METRIC];

/** Extra metric names this serverless build adds (lease and fencing observability). */
export const EXTRA_METRIC = {
  staleWorkDiscarded: "choria_provisioner_stale_work_discarded",
  leaseStoreErrors: "choria_provisioner_lease_store_errors",
  leaseTerm: "choria_provisioner_lease_term",
  lifecycleEventsDropped: "choria_provisioner_lifecycle_events_dropped",
  /** Startup events a node sent before it was last provisioned (stale: a durable stream's backlog after a failover), dropped. */
  lifecycleEventsStale: "choria_provisioner_lifecycle_events_stale",
  /** Hosts parked in the host-work DLQ after failing at one step `HOST_FAILURE_LIMIT` times in a row. */
  hostsParked: "choria_provisioner_hosts_parked",
  /** Startup events of `lifecycle_component` a leading lifecycle function handled (admitted or not). */
  lifecycleEventsReceived: "choria_provisioner_lifecycle_events_received",
  /** A discovery stopped reading at its collection bound (a multiple of `discovery_max_nodes`). */
  discoveryCapped: "choria_provisioner_discovery_capped",
  /** Discovered names not admitted: over `discovery_new_names_per_interval` or over `discovery_max_nodes`. */
  discoveryNamesDropped: "choria_provisioner_discovery_names_dropped",
  /** Lifecycle events SQS refused for good, sent to the lifecycle DLQ with the reason. */
  lifecycleEventsDeadLettered: "choria_provisioner_lifecycle_events_dead_lettered",
  /** Reprovision requests renewal sent that left for the node, answered or not. */
  renewalsSent: "choria_provisioner_renewals_sent",
  /** Renewed hosts provisioned again with fresh credentials. */
  renewalsCompleted: "choria_provisioner_renewals_completed",
  /** Renewals that failed: the node refused reprovision, did not answer, or was not provisioned again within `renew.timeout`. */
  renewalFailures: "choria_provisioner_renewal_failures",
  /** 1 while renewal has paused itself after too many failures. */
  renewalPaused: "choria_provisioner_renewal_paused",
  /** Hosts renewal has put out of service that are not provisioned again yet. */
  renewalsInFlight: "choria_provisioner_renewals_in_flight",
  /**
   * Sends a minute renewal is short of to renew every provisioned host before its credentials
   * expire (lib/app/renewal-capacity.ts); 0 when it keeps up. A gauge.
   */
  renewalCapacityShortfall: "choria_provisioner_renewal_capacity_shortfall",
  /** Provisioned hosts whose credentials have expired (status says what to do for each). */
  credentialsExpired: "choria_provisioner_credentials_expired",
  /** Hosts not expired yet but in the last quarter of their renewal window (the alarm fires before the first expires). */
  renewalHostsAtRisk: "choria_provisioner_renewal_hosts_at_risk",
  /** A lease round found the holder's skew bound or request TTL different from this deployment's. */
  leaseSettingsMismatch: "choria_provisioner_lease_settings_mismatch",
  /** Other deployments of the site (reported in the last 10 minutes) that use another admission registry than this one. */
  registryMismatch: "choria_provisioner_registry_mismatch",
  /** A lease round found another deployment in the lease item that `lease.peers` does not name. */
  leaseUnknownPeers: "choria_provisioner_lease_unknown_peers",
  /**
   * 1 when the lease item a round read has had no valid holder (expired or released, nobody took it
   * over) for longer than a takeover takes (lib/lease/alarms.ts, unheldTooLong); 0 otherwise.
   */
  leaseUnheld: "choria_provisioner_lease_unheld",
  /**
   * How long each provision kept a worker busy, observed when it ends: the Sum over a period divided
   * by the period is the average number of workers busy across all invocations.
   */
  busyWorkerSeconds: "choria_provisioner_busy_worker_seconds",
} as const;

export type AnyMetricName = MetricName | (typeof EXTRA_METRIC)[keyof typeof EXTRA_METRIC];

/** Labels beyond `site`; only `rpc` (`agent#action`) is used, as in the Go daemon. */
export interface MetricLabels {
  rpc?: string;
}

export interface Metrics {
  gauge(name: AnyMetricName, value: number, labels?: MetricLabels): void;
  count(name: AnyMetricName, increment?: number, labels?: MetricLabels): void;
  /** A duration observation in seconds (Go: a summary/histogram). */
  timing(name: AnyMetricName, seconds: number, labels?: MetricLabels): void;
}

export interface RpcCall {
  identity: string;
  agent: string;
  action: string;
  data: Record<string, unknown>;
  /** Per-attempt timeout: discovery timeout (2 s) + the agent's DDL timeout. */
  timeoutMs: number;
  /**
   * The send-by instant, as ms from this call: after it the request must not leave the process;
   * default `timeoutMs`. Set from the gate's AttemptWindow. Relative, so the client's clock and the
   * gate's need not be the same object.
   */
  sendWithinMs?: number;
  /** The envelope `time` is the gate check's: this many ms before this call (default 0, the send). */
  gateCheckedMsAgo?: number;
}

export interface RpcReply<T = Record<string, unknown>> {
  sender: string;
  statuscode: number;
  statusmsg: string;
  data: T;
}

/**
 * One direct Choria RPC attempt to one node. Resolves only with exactly one reply from the target
 * whose statuscode is 0; otherwise throws RpcTimeoutError, RpcStatusError or RpcProtocolError.
 * Retries, backoff and the pause gate belong to the caller.
 */
export interface ChoriaRpc {
  call(call: RpcCall): Promise<RpcReply>;
}

/** Broadcast discovery of nodes in provisioning mode (agent filter `choria_provision`). */
export interface NodeDiscoverer {
  discover(): Promise<string[]>;
}

/** What an open gate grants one attempt: it must be over, at the node too, by `endsBy`. */
export interface AttemptWindow {
  term: number;
  /** Wall-clock epoch ms of the gate check: the envelope `time` of the attempt's request. */
  stampedAt: number;
  /** Monotonic ms by which the attempt (sending, the node's handling, the reply) must be over; inside the lease validity. */
  endsBy: number;
}

/**
 * The pause gate (docs/behaviour.md §4). Resolves with the attempt's window when this deployment holds
 * lease term `term`, that term is still current, and the remaining validity covers an action
 * lasting `attemptTimeoutMs`; otherwise throws PausedError (or LeaseLostError), or
 * AttemptExceedsLeaseError when no validity could ever cover it. Read before every RPC attempt
 * and every helper run.
 */
export interface PauseGate {
  assertOpen(term: number, attemptTimeoutMs: number): Promise<AttemptWindow>;
}

/** What the helper gets on stdin (keys in the Go daemon's order). */
export interface HelperRequest {
  identity: string;
  csr: { csr: string; public_key: string; ssldir: string } | null;
  ed25519_pubkey: { public_key: string; directory: string; signature: string } | null;
  /** JSON text of the rpcutil#inventory reply data (keys sorted). */
  inventory: string;
  /** Verified provisioning JWT claims, or null when the jwt feature is off. */
  jwt: Record<string, unknown> | null;
}

export interface ServerClaimsOverride {
  ou?: string;
  exp?: number;
  collectives?: string[];
  pub_subjects?: string[];
  permissions?: { submission?: boolean; streams?: boolean; governor?: boolean; service_host?: boolean };
}

/** What the helper answers on stdout, validated. */
export interface HelperResponse {
  defer: boolean;
  shutdown: boolean;
  msg: string;
  configuration: Record<string, string>;
  certificate: string;
  ca: string;
  key: string;
  ssldir: string;
  server_claims: ServerClaimsOverride | null;
  action_policies: Record<string, string>;
  opa_policies: Record<string, string>;
  upgrade: string;
}

export interface HelperRunner {
  run(request: HelperRequest): Promise<HelperResponse>;
}

/** Where a host's admission came from. */
export type AdmissionSource = "discovery" | "event" | "operator";

/** One unit of queued host work. `term` is the fencing token it was admitted under. */
export interface HostWork {
  identity: string;
  term: number;
  /** Wall-clock epoch ms of admission; work older than 2 x interval is skipped. */
  admittedAt: number;
  source: AdmissionSource;
}
