/** The Lambda functions' metrics: CloudWatch EMF through Powertools. */
import { Metrics as PowertoolsMetrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { MetricUnit as MetricUnitValue } from "@aws-lambda-powertools/metrics/types";
import type { AnyMetricName } from "../ports/metric-names";
import type { MetricLabels, Metrics } from "../ports/metrics";
import { APP_DEFAULTS } from "./settings";

/** EMF rejects empty dimension values; the Go daemon's unset site is the empty label. */
const UNSET_SITE = "unset";
/** How many `rpc` labels keep their own single-metric instance. */
const MAX_KEPT_RPC_LABELS = 64;

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
      namespace: options.namespace ?? APP_DEFAULTS.metricsNamespace,
      serviceName: options.serviceName ?? "choria-provisioner",
    });
  powertools.setDefaultDimensions({ site });

  // One single-metric instance per `rpc` label, kept: building one costs a Console and the
  // environment reads of a new Metrics, several times per host. A single metric is published
  // at once and cleared, and its default dimensions (site, rpc) stay for the next.
  const perRpc = new Map<string, PowertoolsMetrics>();
  const rpcMetrics = (rpc: string): PowertoolsMetrics => {
    let single = perRpc.get(rpc);
    if (!single) {
      single = powertools.singleMetric();
      single.setDefaultDimensions({ rpc });
      // agent#action pairs are a short fixed list; past the bound a label is not kept.
      if (perRpc.size < MAX_KEPT_RPC_LABELS) perRpc.set(rpc, single);
    }
    return single;
  };
  const record = (name: AnyMetricName, unit: MetricUnitValue, value: number, labels?: MetricLabels) => {
    if (labels?.rpc) rpcMetrics(labels.rpc).addMetric(name, unit, value);
    else powertools.addMetric(name, unit, value);
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
