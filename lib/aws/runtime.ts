/**
 * Per-container state of the Lambda functions: the Powertools instances the handler middlewares
 * use, and the function composed from the environment on first use (warm invocations reuse both).
 * No top-level await: the handlers are bundled as CommonJS.
 */
import { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import { Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import { Tracer } from "@aws-lambda-powertools/tracer";
import { APP_DEFAULTS, appSettingsFromEnv, type AppSettings } from "./settings";
import type { AppOverrides } from "./compose";

export interface PowertoolsRuntime {
  logger: PowertoolsLogger;
  metrics: PowertoolsMetrics;
  tracer: Tracer;
}

let runtime: PowertoolsRuntime | undefined;

/** Tracing is off unless running in Lambda and not switched off (POWERTOOLS_TRACE_ENABLED=false, `sls invoke local`). */
function tracingEnabled(env: NodeJS.ProcessEnv): boolean {
  return env.POWERTOOLS_TRACE_ENABLED !== "false" && Boolean(env.AWS_LAMBDA_FUNCTION_NAME) && env.IS_LOCAL !== "true";
}

export function powertoolsRuntime(env: NodeJS.ProcessEnv = process.env): PowertoolsRuntime {
  runtime ??= {
    logger: new PowertoolsLogger({ serviceName: env.POWERTOOLS_SERVICE_NAME || APP_DEFAULTS.serviceName }),
    metrics: new PowertoolsMetrics({
      namespace: env.POWERTOOLS_METRICS_NAMESPACE || APP_DEFAULTS.metricsNamespace,
      serviceName: env.POWERTOOLS_SERVICE_NAME || APP_DEFAULTS.serviceName,
    }),
    tracer: new Tracer({ serviceName: env.POWERTOOLS_SERVICE_NAME || APP_DEFAULTS.serviceName, enabled: tracingEnabled(env) }),
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
