export { KeyTransportError, OutOfTimeError, RpcRetriesExhaustedError, UpgradeError } from "./errors";
export { encodeGoJson } from "./go-json";
export { AGENT_TIMEOUT_MS, DISCOVERY_TIMEOUT_MS, HELPER_TIMEOUT_MS, RPC_PLAN, rpcLabel } from "./plan";
export { goDuration } from "./go-duration";
export { waitedTooLong } from "./waiting";
export { isSuccessfulOutcome, keepsHostKnown, type ProvisionOutcome, type ProvisionStep } from "./outcome";
export { ProvisionEngine } from "./provision";
export type { EngineFeatures, EngineSettings } from "./settings";
export { backoffDelayMs, FIVE_SEC_BACKOFF_MS, rpcWithRetries, type RandomSource, type RetriedCall } from "./retry";
