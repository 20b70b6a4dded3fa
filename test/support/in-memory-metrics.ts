import type { AnyMetricName } from "../../lib/ports/metric-names";
import type { MetricLabels, Metrics } from "../../lib/ports/metrics";

export type MetricKind = "gauge" | "count" | "timing";

export interface MetricEmission {
  kind: MetricKind;
  name: AnyMetricName;
  value: number;
  site: string;
  rpc?: string;
}

/** Records every emission; for tests, the local run and benchmarks. */
export class InMemoryMetrics implements Metrics {
  readonly emissions: MetricEmission[] = [];

  constructor(readonly site: string = "") {}

  gauge(name: AnyMetricName, value: number, labels?: MetricLabels): void {
    this.push("gauge", name, value, labels);
  }

  count(name: AnyMetricName, increment = 1, labels?: MetricLabels): void {
    this.push("count", name, increment, labels);
  }

  timing(name: AnyMetricName, seconds: number, labels?: MetricLabels): void {
    this.push("timing", name, seconds, labels);
  }

  /** Emissions of `name`, optionally only those with the given `rpc` label. */
  find(name: AnyMetricName, labels?: MetricLabels): MetricEmission[] {
    return this.emissions.filter((e) => e.name === name && (labels?.rpc === undefined || e.rpc === labels.rpc));
  }

  /** Sum of all counter increments of `name`. */
  total(name: AnyMetricName, labels?: MetricLabels): number {
    return this.find(name, labels).reduce((sum, e) => sum + e.value, 0);
  }

  /** The most recent value of `name` (a gauge's current value), or undefined if never emitted. */
  last(name: AnyMetricName, labels?: MetricLabels): number | undefined {
    return this.find(name, labels).at(-1)?.value;
  }

  /** Every value of `name` in order (timings, gauge history). */
  values(name: AnyMetricName, labels?: MetricLabels): number[] {
    return this.find(name, labels).map((e) => e.value);
  }

  clear(): void {
    this.emissions.length = 0;
  }

  private push(kind: MetricKind, name: AnyMetricName, value: number, labels?: MetricLabels): void {
    this.emissions.push({ kind, name, value, site: this.site, ...(labels?.rpc ? { rpc: labels.rpc } : {}) });
  }
}
