/** The metrics port: what the domain emits, by the names of lib/observability/metric-names.ts. */
import type { AnyMetricName } from "./metric-names";

/** Labels beyond `site`; only `rpc` (`agent#action`) is used, as in the Go daemon. */
export interface MetricLabels {
  rpc?: string;
}

export interface Metrics {
  gauge(name: AnyMetricName, value: number, labels?: MetricLabels): void;
  count(name: AnyMetricName, increment?: number, labels?: MetricLabels): void;
  /** A duration observation in seconds (Go: a summary/histogram). */
  timing(name: AnyMetricName, seconds: number, labels?: MetricLabels): void;
}
