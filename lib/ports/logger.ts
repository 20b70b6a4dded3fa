/** The logger port: structured logs; the Powertools logger satisfies it. */
export type LogAttributes = Record<string, unknown>;

/** Structured logger; the Powertools logger satisfies it. Never pass secrets in attributes. */
export interface Logger {
  debug(message: string, attributes?: LogAttributes): void;
  info(message: string, attributes?: LogAttributes): void;
  warn(message: string, attributes?: LogAttributes): void;
  error(message: string, attributes?: LogAttributes): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
