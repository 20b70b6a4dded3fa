import type { AnyMetricName, Clock, LogAttributes, Logger, Metrics } from "../../../lib/ports";

/** Several clocks sharing one true time, each with its own wall-clock offset. */
export class SharedTime {
  constructor(public trueTime = 1_700_000_000_000) {}
  clock(offsetMs = 0): Clock & { advance(ms: number): void } {
    return {
      now: () => this.trueTime + offsetMs,
      monotonic: () => this.trueTime - 1_690_000_000_000,
      sleep: async (ms) => {
        this.trueTime += ms;
      },
      advance: (ms) => {
        this.trueTime += ms;
      },
    };
  }
  advance(ms: number): void {
    this.trueTime += ms;
  }
}

export class RecordingMetrics implements Metrics {
  readonly gauges: Array<{ name: AnyMetricName; value: number }> = [];
  readonly counts: Array<{ name: AnyMetricName; increment: number }> = [];
  gauge(name: AnyMetricName, value: number): void {
    this.gauges.push({ name, value });
  }
  count(name: AnyMetricName, increment = 1): void {
    this.counts.push({ name, increment });
  }
  timing(): void {}
  lastGauge(name: AnyMetricName): number | undefined {
    return this.gauges.filter((gauge) => gauge.name === name).at(-1)?.value;
  }
  total(name: AnyMetricName): number {
    return this.counts.filter((count) => count.name === name).reduce((sum, count) => sum + count.increment, 0);
  }
}

export class RecordingLogger implements Logger {
  readonly lines: Array<{ level: string; message: string; attributes?: LogAttributes }> = [];
  debug(message: string, attributes?: LogAttributes): void {
    this.lines.push({ level: "debug", message, attributes });
  }
  info(message: string, attributes?: LogAttributes): void {
    this.lines.push({ level: "info", message, attributes });
  }
  warn(message: string, attributes?: LogAttributes): void {
    this.lines.push({ level: "warn", message, attributes });
  }
  error(message: string, attributes?: LogAttributes): void {
    this.lines.push({ level: "error", message, attributes });
  }
}
