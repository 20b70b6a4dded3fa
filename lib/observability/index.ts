export {
  createConsoleLogger,
  type ConsoleLoggerOptions,
  type LoggerOptions,
  type LogLevel,
} from "./logger";
export {
  DEFAULT_NAMESPACE,
  InMemoryMetrics,
  type MetricEmission,
  type MetricKind,
} from "./metrics";
export { REDACTED, Redactor, isSecretAttributeName } from "./redact";
