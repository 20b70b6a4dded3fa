export { DEFAULT_MAX_OUTPUT_BYTES, decodeHelperResponse, encodeHelperRequest } from "./codec";
export { ExecHelperRunner, type ExecHelperRunnerOptions } from "./exec-runner";
export {
  LambdaHelperRunner,
  type HelperInvoke,
  type HelperInvokeResult,
  type LambdaHelperRunnerOptions,
} from "./lambda-runner";
export { splitCommandLine } from "./shellwords";
