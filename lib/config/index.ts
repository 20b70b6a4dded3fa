export { DEFAULT_CERT_DENY_LIST } from "../crypto/csr";
export { REDACTED } from "../observability/redact";
export {
  leaseSettingsOf,
  parseConfig,
  type FeatureFlags,
  type LeaseSection,
  type LogLevel,
  type ParseConfigOptions,
  type ProvisionerConfig,
  type TlsSettings,
} from "./config";
export { DurationError, parseDuration } from "./duration";
export { SETTINGS, secretValues, type KeySpec, type ReferenceSetting, type SecretKey, type Setting } from "./keys";
export { loadConfig, type LoadConfigOptions } from "./load";
export {
  FUNCTION_NAMES,
  FUNCTION_SETTINGS,
  KEY_FILE_SETTINGS,
  REFERENCE_SETTINGS,
  SECRET_KEYS,
  formatSecretReference,
  functionUses,
  parseSecretReference,
  type FunctionName,
  type SecretReference,
  type SecretResolver,
  type SecretStore,
} from "./secrets";
