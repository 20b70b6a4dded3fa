export {
  ProvisionerApp,
  RetryLaterError,
  type App,
  type AppDeps,
  type AppQueues,
  type BridgeResult,
  type BrokerAccess,
  type DiscoverResult,
  type InvocationContext,
  type KeepLeaseResult,
  type ReprovisionResult,
  type StatusReport,
} from "./app";
export { createApp, defaultConsumerName, PROVISIONER_VERSION, type AppOverrides } from "./create-app";
export { decodeHostWork, encodeHostWork, retryDelaySeconds } from "./host-work";
export type { RegistrySummary } from "../admission/registry";
export type { MessageQueue, OutgoingMessage, QueueCounts } from "./ports";
export { APP_DEFAULTS, AppSettingsError, appSettingsFromEnv, tableArnRegion, type AppSettings } from "./settings";
