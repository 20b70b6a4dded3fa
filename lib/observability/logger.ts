import { withCauseChain } from "../errors";
import type { LogAttributes } from "../ports/logger";
import { Redactor } from "./redact";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface LoggerOptions {
  serviceName?: string;
  level?: LogLevel;
  /** Secret values (e.g. `secretValues(config)`) masked wherever they appear in a log line. */
  secretValues?: Iterable<string>;
}

/** One record as both loggers (Powertools, and the local run's console logger) write it: the message and attributes, credentials masked. */
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
