export { createConsoleLogger, maskedRecord, type LoggerOptions, type LogLevel } from "./logger";
export { DEFAULT_NAMESPACE } from "./metrics";
export { InMemoryMetrics } from "../../test/support/in-memory-metrics";
export { REDACTED, Redactor, isSecretAttributeName } from "./redact";
