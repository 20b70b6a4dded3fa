export { AdmissionFlow, type AdmissionFlowDeps, type AdmissionResult, type ReadmitOutcome } from "./admission-flow";
export { deadLetter, RetryLaterError, runBatch } from "./batch";
export { HostWorkProcessor, retryDelaySeconds, type HostWorkDeps, type HostWorkSettings } from "./host-work";
export { decodeHostWork, encodeHostWork } from "./host-work-message";
export { Invocations, withInvocationAttributes, type InvocationsDeps } from "./invocation";
export { KEEPER_MAX_RUN_MS, Leadership, type DiscoverResult, type KeepLeaseResult, type LeadershipDeps, type LeadershipSettings } from "./leadership";
export {
  LifecycleBridge,
  LifecycleEvents,
  type BridgeResult,
  type LifecycleBridgeDeps,
  type LifecycleBridgeSettings,
  type LifecycleEventsDeps,
} from "./lifecycle-events";
export {
  queueDepths,
  release,
  reprovision,
  status,
  type QueueDepth,
  type QueueName,
  type ReleaseDeps,
  type ReprovisionDeps,
  type ReprovisionResult,
  type StatusDeps,
  type StatusQueues,
  type StatusReport,
} from "./operator";
export type { RegistrySummary } from "../admission/registry";
export type {
  BatchResult,
  Broker,
  BrokerEvent,
  ForwardOutcome,
  InvocationContext,
  LifecycleEventRun,
  LifecycleEventSource,
  MessageQueue,
  OutgoingMessage,
  QueueCounts,
  QueueMessage,
  SendOutcome,
} from "./ports";
export { APP_DEFAULTS, appSettingsFromEnv, tableArnRegion, type AppSettings } from "./settings";
