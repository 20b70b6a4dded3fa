/** The metric names: the Go provisioner's, and the ones this build adds. */

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
  /**
   * Hosts whose provisioning JWT, as they last presented it, expires within `provisioning_jwt_warning`
   * (not expired yet): their image's bootstrap credential is about to stop enrolling. A gauge, from each discovery.
   */
  provisioningJwtsExpiring: "choria_provisioner_provisioning_jwts_expiring",
  /** Hosts whose presented provisioning JWT has expired: they no longer enrol. A gauge, from each discovery. */
  provisioningJwtsExpired: "choria_provisioner_provisioning_jwts_expired",
  /** The automatic renewal send rate now, a minute: `renew.rate`, or where slow start has ramped to (a gauge). */
  renewalRate: "choria_provisioner_renewal_rate",
  /** Renewals sent outside the maintenance windows or in a freeze because the host would expire before the next allowed moment. */
  renewalsOutsideWindow: "choria_provisioner_renewals_outside_window",
  /**
   * Hosts of the site held in quarantine (two machines answer as one identity, or the identity cannot
   * be unique: docs/audit.md); a gauge each discovery sets, so its alarm fires until they are released.
   */
  hostsQuarantined: "choria_provisioner_hosts_quarantined",
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
