export { DEFAULT_CERT_DENY_LIST } from "../crypto/csr";
export { leaseSettingsOf, parseConfig } from "./config";
export type { ProvisionerConfig } from "./types";
export { DurationError, parseDuration } from "./duration";
export { SETTINGS, secretValues, type KeySpec } from "./keys";
export { loadConfig } from "./load";
export {
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
} from "./secrets";
