import type { LogAttributes, Logger } from "../ports";
import { Redactor } from "./redact";

export type LogLevel = "debug" | "info" | "warn" | "error";

const LEVEL_ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface LoggerOptions {
  serviceName?: string;
  level?: LogLevel;
  /** Secret values (e.g. `secretValues(config)`) masked wherever they appear in a log line. */
  secretValues?: Iterable<string>;
}

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
    const record = {
      level: level.toUpperCase(),
      message: redactor.text(message),
      service,
      timestamp: new Date(now()).toISOString(),
      ...redactor.attributes(attributes),
    };
    write(JSON.stringify(record));
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
