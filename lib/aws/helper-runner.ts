import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { secretValues } from "../config/keys";
import type { ProvisionerConfig } from "../config/types";
import { ExecHelperRunner } from "../helper/exec-runner";
import { LambdaHelperRunner, type HelperInvoke } from "../helper/lambda-runner";
import type { HelperRunner } from "../ports/helper";

/** Builds the synchronous (RequestResponse) Lambda invocation the LambdaHelperRunner calls. */
function createLambdaInvoke(functionName: string, client: LambdaClient = new LambdaClient({})): HelperInvoke {
  return async (payload, { signal }) => {
    const response = await client.send(
      new InvokeCommand({ FunctionName: functionName, InvocationType: "RequestResponse", Payload: payload }),
      { abortSignal: signal },
    );
    return { payload: response.Payload, functionError: response.FunctionError, statusCode: response.StatusCode };
  };
}

/** The helper runner the configuration asks for: `helper_function` (Lambda) or `helper` (process). */
export function createHelperRunner(config: ProvisionerConfig, client?: LambdaClient): HelperRunner {
  if (config.helperFunction) {
    return new LambdaHelperRunner({
      invoke: createLambdaInvoke(config.helperFunction, client),
      name: config.helperFunction,
      timeoutMs: config.helperTimeoutMs,
    });
  }
  return new ExecHelperRunner({ command: config.helper ?? "", timeoutMs: config.helperTimeoutMs, secretValues: secretValues(config) });
}
