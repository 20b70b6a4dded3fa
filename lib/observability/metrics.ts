import { Metrics as PowertoolsMetrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { MetricUnit as MetricUnitValue } from "@aws-lambda-powertools/metrics/types";
import type { AnyMetricName, MetricLabels, Metrics } from "../ports";

export const DEFAULT_NAMESPACE = "ChoriaProvisioner";

/** EMF rejects empty dimension values; the Go daemon's unset site is the empty label. */
const UNSET_SITE = "unset";

export interface PowertoolsMetricsOptions {
  site: string;
  namespace?: string;
  serviceName?: string;
  /** An existing instance, e.g. the one handed to the middy `logMetrics` middleware. */
  metrics?: PowertoolsMetrics;
}

export interface FlushableMetrics extends Metrics {
  /** Writes buffered EMF records to stdout; call at the end of an invocation. */
  flush(): void;
  readonly powertools: PowertoolsMetrics;
}

/**
 * Metrics as CloudWatch EMF through Powertools. Every record carries the `site` dimension; an
 * observation with an `rpc` label is emitted on its own record with the extra `rpc` dimension, as
 * the Go daemon's rpc_time / rpc_errors vectors are labelled by `agent#action`.
 */
export function createPowertoolsMetrics(options: PowertoolsMetricsOptions): FlushableMetrics {
  const site = options.site || UNSET_SITE;
  const powertools =
    options.metrics ??
    new PowertoolsMetrics({
      namespace: options.namespace ?? DEFAULT_NAMESPACE,
      serviceName: options.serviceName ?? "choria-provisioner",
    });
  powertools.setDefaultDimensions({ site });

  const record = (name: AnyMetricName, unit: MetricUnitValue, value: number, labels?: MetricLabels) => {
    if (labels?.rpc) {
      const single = powertools.singleMetric();
      single.addDimension("rpc", labels.rpc);
      single.addMetric(name, unit, value);
      return;
    }
    powertools.addMetric(name, unit, value);
  };

  return {
    powertools,
    gauge: (name, value, labels) => record(name, MetricUnit.Count, value, labels),
    count: (name, increment = 1, labels) => record(name, MetricUnit.Count, increment, labels),
    timing: (name, seconds, labels) => record(name, MetricUnit.Seconds, seconds, labels),
    flush: () => {
      if (powertools.hasStoredMetrics()) powertools.publishStoredMetrics();
    },
  };
}

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
