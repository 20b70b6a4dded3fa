/** The lease gate as every function composes it, over the lease table's DynamoDB stores. */
import type { DynamoDBClient } from "../dynamodb/client";
import { DynamoDbLeaseStore } from "../dynamodb/lease-store";
import { DynamoDbPauseStore } from "../dynamodb/pause-store";
import { leaseSettingsOf } from "../config/config";
import type { ProvisionerConfig } from "../config/types";
import { createLeaseGate } from "../lease/gate";
import type { LeaseGate, OnWonTerm } from "../ports/lease-gate";
import type { LeaseStore } from "../ports/lease-store";
import type { PauseStore } from "../ports/pause-store";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";

/** One whole gate round (writes, settling read, SDK retries) may take at most this long. */
const LEASE_ROUND_TIMEOUT_MS = 4_000;

interface AppLeaseGateDeps {
  client: DynamoDBClient;
  /** LEASE_TABLE; required when leader election is on. */
  tableName: string | undefined;
  metrics: Metrics;
  clock: Clock;
  logger: Logger;
  onWon?: OnWonTerm;
}

/**
 * The lease gate as every function composes it (and bench/failover.ts measures it): the
 * configuration's lease settings, the request TTL as the delivery horizon, bounded rounds, and the
 * operator's pause switch read from the same table before every round.
 */
export function createAppLeaseGate(
  config: ProvisionerConfig,
  deps: AppLeaseGateDeps,
): { gate: LeaseGate; leaseStore: LeaseStore | undefined; pauseStore: PauseStore | undefined } {
  const tableName = deps.tableName ?? "";
  const leaseStore = config.leaderElection ? new DynamoDbLeaseStore({ client: deps.client, tableName }) : undefined;
  const pauseStore = leaseStore ? new DynamoDbPauseStore({ client: deps.client, tableName }) : undefined;
  const gate = createLeaseGate(
    leaseSettingsOf(config, { roundTimeoutMs: LEASE_ROUND_TIMEOUT_MS }),
    {
      store: leaseStore,
      pause: pauseStore,
      metrics: deps.metrics,
      clock: deps.clock,
      logger: deps.logger,
      ...(deps.onWon ? { onWon: deps.onWon } : {}),
    },
  );
  return { gate, leaseStore, pauseStore };
}
