/**
 * The one middy stack every handler uses: Powertools logger (Lambda context and request id on
 * every line) and metrics (EMF flushed after each invocation). Everything here is built at module
 * scope once per container; each function is composed on its first invocation.
 *
 * No Powertools tracer: Lambda's active tracing (serverless.yml) records each invocation without
 * it, and the X-Ray SDK it loads installs an async hook with destroy tracking on every promise of
 * the container whether tracing is on or not (about 8 % of a provision container's main thread in
 * bench:peer's profile; test/unit/aws/function-bundles.test.ts keeps such packages out).
 */
import middy from "@middy/core";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import type { Context } from "aws-lambda";
import type { InvocationContext } from "../app/use-case-ports";
import { createLogger } from "./powertools-logger";
import { powertoolsRuntime } from "./runtime";

/** Used only when an invoker passes no Lambda context (a plain function call in a script). */
const NO_CONTEXT_BUDGET_MS = 60_000;

/**
 * `sls invoke local` (which sets IS_LOCAL) runs one invocation and then waits for the process to
 * exit, which the open broker connection would prevent forever; on Lambda the container is frozen
 * instead and the connection is reused by the next invocation.
 */
const closeAfterInvocation = process.env.IS_LOCAL === "true";

/** What a handler runs: one function's composition (or the whole stack's App). */
export interface Closable {
  close(): Promise<void>;
}

export type FunctionAction<TFunction, TEvent, TResult> = (fn: TFunction, event: TEvent, context: InvocationContext) => Promise<TResult>;

export function wrapHandler<TFunction extends Closable, TEvent, TResult>(
  getFunction: () => Promise<TFunction>,
  action: FunctionAction<TFunction, TEvent, TResult>,
) {
  const { logger, metrics } = powertoolsRuntime();
  const compositionFailures = createLogger({ logger });
  return middy(async (event: TEvent, context: Context): Promise<TResult> => {
    let fn: TFunction;
    try {
      fn = await getFunction();
    } catch (error) {
      // Lambda's own "Invoke Error" line gives the message of what was thrown and no cause: a
      // secret that could not be resolved reads the same for a wrong ARN and for a denied role.
      // (Once composed, the function logs its own failures, to the logger it was given.)
      compositionFailures.error("the function could not be composed", { error });
      throw error;
    }
    try {
      return await action(fn, event, invocationContext(context));
    } finally {
      if (closeAfterInvocation) await fn.close();
    }
  })
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(logMetrics(metrics, { throwOnEmptyMetrics: false }));
}

function invocationContext(context: Partial<Context> | undefined): InvocationContext {
  const started = Date.now();
  const remainingMs =
    typeof context?.getRemainingTimeInMillis === "function"
      ? () => (context.getRemainingTimeInMillis as () => number)()
      : () => NO_CONTEXT_BUDGET_MS - (Date.now() - started);
  return context?.awsRequestId ? { remainingMs, requestId: context.awsRequestId } : { remainingMs };
}
