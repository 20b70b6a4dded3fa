export {
  DEFAULT_CERT_DENY_LIST,
  REDACTED,
  parseConfig,
  secretValues,
  type FeatureFlags,
  type LeaseSettings,
  type LogLevel,
  type ParseConfigOptions,
  type ProvisionerConfig,
  type TlsSettings,
} from "./config";
export { DurationError, parseDuration } from "./duration";
export { loadConfig, type LoadConfigOptions } from "./load";
export {
  SECRET_KEYS,
  SecretResolutionError,
  parseSecretReference,
  type SecretKey,
  type SecretReference,
  type SecretResolver,
  type SecretStore,
} from "./secrets";
