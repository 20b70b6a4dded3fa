export {
  createConsoleLogger,
  createLogger,
  type ConsoleLoggerOptions,
  type LoggerOptions,
  type LogLevel,
  type PowertoolsLoggerOptions,
} from "./logger";
export {
  DEFAULT_NAMESPACE,
  InMemoryMetrics,
  createPowertoolsMetrics,
  type FlushableMetrics,
  type MetricEmission,
  type MetricKind,
  type PowertoolsMetricsOptions,
} from "./metrics";
export { REDACTED, Redactor, isSecretAttributeName } from "./redact";
