/**
 * Per-container state of the Lambda functions: the Powertools instances the handler middlewares
 * use, and the function composed from the environment on first use (warm invocations reuse both).
 * No top-level await: the handlers are bundled as CommonJS.
 */
import { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import { Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import { APP_DEFAULTS, appSettingsFromEnv, type AppSettings } from "./settings";
import type { AppOverrides } from "./compose";

export interface PowertoolsRuntime {
  logger: PowertoolsLogger;
  metrics: PowertoolsMetrics;
}

let runtime: PowertoolsRuntime | undefined;

export function powertoolsRuntime(env: NodeJS.ProcessEnv = process.env): PowertoolsRuntime {
  runtime ??= {
    logger: new PowertoolsLogger({ serviceName: env.POWERTOOLS_SERVICE_NAME || APP_DEFAULTS.serviceName }),
    metrics: new PowertoolsMetrics({
      namespace: env.POWERTOOLS_METRICS_NAMESPACE || APP_DEFAULTS.metricsNamespace,
      serviceName: env.POWERTOOLS_SERVICE_NAME || APP_DEFAULTS.serviceName,
    }),
  };
  return runtime;
}

/**
 * The container's function, composed from process.env on the first call and shared afterwards
 * (`compose` is the function's own composition, lib/aws/functions/*.ts). A failed composition is
 * not cached, so the next invocation tries again (e.g. after a secret became readable).
 */
export function lazyFunction<T>(compose: (settings: AppSettings, overrides: AppOverrides) => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= (async () => {
      const { logger, metrics } = powertoolsRuntime();
      return compose(appSettingsFromEnv(process.env), { powertools: { logger, metrics } });
    })().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}
