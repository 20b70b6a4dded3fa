export { KeyTransportError, OutOfTimeError, RpcRetriesExhaustedError, ServerJwtError, UpgradeError } from "./errors";
export { encodeGoJson } from "./go-json";
export {
  AGENT_TIMEOUT_MS,
  DISCOVERY_TIMEOUT_MS,
  HELPER_TIMEOUT_MS,
  KNOWN_AFTER_SUCCESS_MS,
  RESTART_SPLAY_SECONDS,
  RPC_PLAN,
  rpcLabel,
  type PlannedAgent,
  type PlannedRpc,
  type RpcPlan,
} from "./plan";
export { goDuration } from "./go-duration";
export { waitedTooLong } from "./waiting";
export {
  isSuccessfulOutcome,
  keepsHostKnown,
  ProvisionEngine,
  type EngineDeps,
  type EngineFeatures,
  type EngineSettings,
  type ProvisionOptions,
  type ProvisionOutcome,
  type ProvisionStep,
} from "./provision";
export {
  assertGateOpen,
  assertTimeLeft,
  backoffDelayMs,
  FIVE_SEC_BACKOFF_MS,
  rpcWithRetries,
  type RandomSource,
  type RemainingTime,
  type RetriedCall,
  type RetryContext,
} from "./retry";
