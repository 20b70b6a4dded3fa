/**
 * The one middy stack every handler uses: Powertools tracer, logger (Lambda context and request
 * id on every line) and metrics (EMF flushed after each invocation). Everything here is built at
 * module scope once per container; the App itself is built on the first invocation.
 */
import middy from "@middy/core";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import { captureLambdaHandler } from "@aws-lambda-powertools/tracer/middleware";
import type { Context } from "aws-lambda";
import type { App } from "../app/create-app";
import type { InvocationContext } from "../app/ports";
import { powertoolsRuntime } from "./runtime";

/** Used only when an invoker passes no Lambda context (a plain function call in a script). */
const NO_CONTEXT_BUDGET_MS = 60_000;

/**
 * `sls invoke local` (which sets IS_LOCAL) runs one invocation and then waits for the process to
 * exit, which the open broker connection would prevent forever; on Lambda the container is frozen
 * instead and the connection is reused by the next invocation.
 */
const closeAfterInvocation = process.env.IS_LOCAL === "true";

export type AppAction<TEvent, TResult> = (app: App, event: TEvent, context: InvocationContext) => Promise<TResult>;

export function wrapHandler<TEvent, TResult>(getApp: () => Promise<App>, action: AppAction<TEvent, TResult>) {
  const { logger, metrics, tracer } = powertoolsRuntime();
  return middy(async (event: TEvent, context: Context): Promise<TResult> => {
    const app = await getApp();
    try {
      return await action(app, event, invocationContext(context));
    } finally {
      if (closeAfterInvocation) await app.close();
    }
  })
    .use(captureLambdaHandler(tracer, { captureResponse: false }))
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(logMetrics(metrics, { throwOnEmptyMetrics: false }));
}

export function invocationContext(context: Partial<Context> | undefined): InvocationContext {
  const started = Date.now();
  const remainingMs =
    typeof context?.getRemainingTimeInMillis === "function"
      ? () => (context.getRemainingTimeInMillis as () => number)()
      : () => NO_CONTEXT_BUDGET_MS - (Date.now() - started);
  return context?.awsRequestId ? { remainingMs, requestId: context.awsRequestId } : { remainingMs };
}
