import { withCauseChain } from "../errors";
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

/** One record as both loggers write it: the message and attributes, credentials masked. */
export interface MaskedRecord {
  message: string;
  attributes: LogAttributes | undefined;
}

/**
 * The record for one log call: an Error under `error` adds to the message what the message does
 * not already say of its cause chain, so a line read on its own (an operator filtering on ERROR)
 * tells a wrong ARN from a slow store; then everything is masked, the causes included.
 */
export function maskedRecord(redactor: Redactor, message: string, attributes?: LogAttributes): MaskedRecord {
  const error = attributes?.error;
  return {
    message: redactor.text(error instanceof Error ? withCauseChain(message, error) : message),
    attributes: redactor.attributes(attributes),
  };
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
