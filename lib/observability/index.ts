export { createConsoleLogger, maskedRecord, type LoggerOptions, type LogLevel } from "./logger";
export { DEFAULT_NAMESPACE, InMemoryMetrics } from "./metrics";
export { REDACTED, Redactor, isSecretAttributeName } from "./redact";
