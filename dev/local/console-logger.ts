/** The local run's logger, which the tests use too: JSON lines on stdout, masked as the Powertools logger masks them. */
import { maskedRecord, type LoggerOptions, type LogLevel } from "../../lib/observability/logger";
import { Redactor } from "../../lib/observability/redact";
import type { LogAttributes, Logger } from "../../lib/ports/logger";

const LEVEL_ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface ConsoleLoggerOptions extends LoggerOptions {
  /** Receives each JSON line without its newline; default writes to stdout. */
  write?: (line: string) => void;
  now?: () => number;
}

/** A dependency-free JSON-lines logger for the local run and benchmarks, with the same masking. */
export function createConsoleLogger(options: ConsoleLoggerOptions = {}): Logger {
  const threshold = LEVEL_ORDER[options.level ?? "info"];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? Date.now;
  const service = options.serviceName ?? "choria-provisioner";
  const redactor = new Redactor(options.secretValues);
  const emit = (level: LogLevel) => (message: string, attributes?: LogAttributes) => {
    if (LEVEL_ORDER[level] < threshold) return;
    const masked = maskedRecord(redactor, message, attributes);
    const record = {
      level: level.toUpperCase(),
      message: masked.message,
      service,
      timestamp: new Date(now()).toISOString(),
      ...masked.attributes,
    };
    write(JSON.stringify(record));
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
