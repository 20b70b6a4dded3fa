import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { createPowertoolsMetrics } from "../../../lib/aws/powertools-metrics";
import { InMemoryMetrics } from "../../support/in-memory-metrics";
import { captureOutput } from "../../support/capture";

interface EmfRecord {
  _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string; Unit: string }> }> };
  [key: string]: unknown;
}

describe("createPowertoolsMetrics", () => {
  // Powertools reads the switch when an instance is built; the local stack's modules set it to
  // "true" at import (dev/local/quiet-powertools.ts), and unit files share one process.
  beforeEach(() => {
    vi.stubEnv("POWERTOOLS_METRICS_DISABLED", "false");
  });

  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("emits EMF with the site dimension, and rpc-labelled observations on their own record", () => {
    // Arrange
    const metrics = createPowertoolsMetrics({ site: "lon", namespace: "ChoriaProvisionerTest" });

    // Act
    const lines = captureOutput(() => {
      metrics.gauge(METRIC.paused, 0);
      metrics.count(METRIC.provisioned);
      metrics.timing(METRIC.helperTime, 0.25);
      metrics.timing(METRIC.rpcTime, 1.5, { rpc: "choria_provision#configure" });
      metrics.count(METRIC.rpcErrors, 1, { rpc: "rpcutil#inventory" });
      metrics.flush();
    });

    // Assert
    const records = lines.map((line) => JSON.parse(line) as EmfRecord);
    expect(records).toHaveLength(3);
    const byRpc = (rpc: string) => records.find((r) => r.rpc === rpc);
    const configure = byRpc("choria_provision#configure");
    expect(configure?.[METRIC.rpcTime]).toBe(1.5);
    expect(configure?.site).toBe("lon");
    expect(configure?._aws.CloudWatchMetrics[0]?.Dimensions[0]).toEqual(expect.arrayContaining(["site", "rpc"]));
    expect(configure?._aws.CloudWatchMetrics[0]?.Metrics).toEqual([{ Name: METRIC.rpcTime, Unit: "Seconds" }]);
    expect(byRpc("rpcutil#inventory")?.[METRIC.rpcErrors]).toBe(1);
    const buffered = records.find((r) => r.rpc === undefined);
    expect(buffered).toMatchObject({ site: "lon", [METRIC.paused]: 0, [METRIC.provisioned]: 1, [METRIC.helperTime]: 0.25 });
    expect(buffered?._aws.CloudWatchMetrics[0]?.Namespace).toBe("ChoriaProvisionerTest");
  });

  it("keeps one single-metric instance per rpc label, each observation still on its own record", () => {
    // Arrange
    const metrics = createPowertoolsMetrics({ site: "lon", namespace: "ChoriaProvisionerTest" });
    const built = vi.spyOn(metrics.powertools, "singleMetric");

    // Act
    const lines = captureOutput(() => {
      metrics.timing(METRIC.rpcTime, 0.5, { rpc: "choria_provision#configure" });
      metrics.timing(METRIC.rpcTime, 0.1, { rpc: "rpcutil#inventory" });
      metrics.timing(METRIC.rpcTime, 0.7, { rpc: "choria_provision#configure" });
      metrics.count(METRIC.rpcErrors, 1, { rpc: "rpcutil#inventory" });
    });

    // Assert
    expect(built).toHaveBeenCalledTimes(2);
    const records = lines.map((line) => JSON.parse(line) as EmfRecord);
    expect(records.map((record) => [record.rpc, record[METRIC.rpcTime] ?? record[METRIC.rpcErrors]])).toEqual([
      ["choria_provision#configure", 0.5],
      ["rpcutil#inventory", 0.1],
      ["choria_provision#configure", 0.7],
      ["rpcutil#inventory", 1],
    ]);
    for (const record of records) {
      expect(record.site).toBe("lon");
      expect(record._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([expect.arrayContaining(["site", "rpc"])]);
      expect(record._aws.CloudWatchMetrics[0]?.Metrics).toHaveLength(1);
    }
  });

  it("carries nothing but names, numbers, site and rpc (no secret can reach it)", () => {
    // Arrange
    const metrics = createPowertoolsMetrics({ site: "lon" });

    // Act
    const lines = captureOutput(() => {
      metrics.count(EXTRA_METRIC.leaseStoreErrors);
      metrics.flush();
    });

    // Assert
    const record = JSON.parse(lines[0] ?? "{}") as Record<string, unknown>;
    const keys = Object.keys(record).filter((key) => key !== "_aws").sort();
    expect(keys).toEqual([EXTRA_METRIC.leaseStoreErrors, "service", "site"].sort());
  });

  it("flush with nothing stored writes nothing", () => {
    // Arrange
    const metrics = createPowertoolsMetrics({ site: "" });

    // Act
    const lines = captureOutput(() => metrics.flush());

    // Assert
    expect(lines).toEqual([]);
  });
});

describe("InMemoryMetrics", () => {
  it("records every emission and answers simple queries", () => {
    // Arrange
    const metrics = new InMemoryMetrics("lon");

    // Act
    metrics.gauge(METRIC.paused, 1);
    metrics.gauge(METRIC.paused, 0);
    metrics.count(METRIC.provisioned);
    metrics.count(METRIC.provisioned, 2);
    metrics.timing(METRIC.rpcTime, 0.5, { rpc: "rpcutil#inventory" });
    metrics.timing(METRIC.rpcTime, 0.7, { rpc: "choria_provision#configure" });

    // Assert
    expect(metrics.last(METRIC.paused)).toBe(0);
    expect(metrics.total(METRIC.provisioned)).toBe(3);
    expect(metrics.values(METRIC.rpcTime)).toEqual([0.5, 0.7]);
    expect(metrics.values(METRIC.rpcTime, { rpc: "rpcutil#inventory" })).toEqual([0.5]);
    expect(metrics.last(METRIC.helperErrors)).toBeUndefined();
    expect(metrics.emissions[0]).toEqual({ kind: "gauge", name: METRIC.paused, value: 1, site: "lon" });
  });

  it("clear() forgets everything", () => {
    // Arrange
    const metrics = new InMemoryMetrics();
    metrics.count(METRIC.discoverCycles);

    // Act
    metrics.clear();

    // Assert
    expect(metrics.emissions).toEqual([]);
  });
});
