export { decodeHelperResponse, encodeHelperRequest } from "./codec";
export { ExecHelperRunner } from "./exec-runner";
export { LambdaHelperRunner, type HelperInvoke } from "./lambda-runner";
export { splitCommandLine } from "./shellwords";
