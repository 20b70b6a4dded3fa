export { KeyTransportError, OutOfTimeError, RpcRetriesExhaustedError, UpgradeError } from "./errors";
export { encodeGoJson } from "./go-json";
export { AGENT_TIMEOUT_MS, DISCOVERY_TIMEOUT_MS, HELPER_TIMEOUT_MS, RPC_PLAN, rpcLabel } from "./plan";
export { goDuration } from "./go-duration";
export { waitedTooLong } from "./waiting";
export {
  isSuccessfulOutcome,
  keepsHostKnown,
  ProvisionEngine,
  type EngineFeatures,
  type EngineSettings,
  type ProvisionOutcome,
  type ProvisionStep,
} from "./provision";
export { backoffDelayMs, FIVE_SEC_BACKOFF_MS, rpcWithRetries, type RandomSource, type RetriedCall } from "./retry";
