/** The Lambda functions' logger: Powertools structured JSON with the same masking as the console logger. */
import { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import { maskedRecord, type LoggerOptions, type LogLevel } from "../observability/logger";
import { Redactor } from "../observability/redact";
import type { LogAttributes, Logger } from "../ports/logger";

export interface PowertoolsLoggerOptions extends LoggerOptions {
  /** An existing Powertools logger (e.g. one the middy injectLambdaContext middleware uses). */
  logger?: PowertoolsLogger;
}

/** The Lambda logger: Powertools structured JSON with credentials masked before they are serialised. */
export function createLogger(options: PowertoolsLoggerOptions = {}): Logger & { readonly powertools: PowertoolsLogger } {
  const powertools =
    options.logger ??
    new PowertoolsLogger({
      serviceName: options.serviceName ?? "choria-provisioner",
      logLevel: (options.level ?? "info").toUpperCase() as "INFO",
    });
  const redactor = new Redactor(options.secretValues);
  const emit = (level: LogLevel) => (message: string, attributes?: LogAttributes) => {
    const record = maskedRecord(redactor, message, attributes);
    if (record.attributes === undefined) powertools[level](record.message);
    else powertools[level](record.message, record.attributes);
  };
  return { powertools, debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
