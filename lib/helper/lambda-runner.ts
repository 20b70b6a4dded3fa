import { HelperError } from "../errors";
import type { HelperRequest, HelperResponse, HelperRunner } from "../ports/helper";
import { DEFAULT_MAX_OUTPUT_BYTES, decodeHelperResponse, encodeHelperRequest } from "./codec";

export interface HelperInvokeResult {
  payload?: Uint8Array;
  /** Lambda's `FunctionError` (`Unhandled`, ...) when the helper function threw. */
  functionError?: string;
  /** Lambda Invoke HTTP status; anything but 2xx is a failure. */
  statusCode?: number;
}

/** One synchronous invocation of the helper function with the host JSON as payload. */
export type HelperInvoke = (payload: Uint8Array, options: { signal: AbortSignal }) => Promise<HelperInvokeResult>;

export interface LambdaHelperRunnerOptions {
  invoke: HelperInvoke;
  /** Name used in error messages (the function name or ARN). */
  name: string;
  timeoutMs?: number;
  maxOutputBytes?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Runs the helper as a Lambda function: the same JSON in, the same response validation as the
 * process helper. Error messages carry the Lambda error type, never the payload; the caller prefixes
 * the step ("helper: function x failed"), so they do not say "helper" again.
 */
export class LambdaHelperRunner implements HelperRunner {
  private readonly timeoutMs: number;
  private readonly maxOutputBytes: number;

  constructor(private readonly options: LambdaHelperRunnerOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  }

  async run(request: HelperRequest): Promise<HelperResponse> {
    const name = this.options.name;
    const result = await this.invokeWithTimeout(encodeHelperRequest(request));
    if (result.statusCode !== undefined && (result.statusCode < 200 || result.statusCode > 299)) {
      throw new HelperError(`function ${name} invocation returned status ${result.statusCode}`);
    }
    if (result.functionError) {
      const type = errorType(result.payload);
      throw new HelperError(`function ${name} failed: ${result.functionError}${type ? ` (${type})` : ""}`);
    }
    const payload = result.payload ?? new Uint8Array();
    if (payload.byteLength > this.maxOutputBytes) {
      throw new HelperError(`function ${name} output too large (limit ${this.maxOutputBytes} bytes)`);
    }
    return decodeHelperResponse(payload, name);
  }

  private async invokeWithTimeout(payload: Uint8Array): Promise<HelperInvokeResult> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // Settle the race before aborting, so an invoke that resolves on abort cannot win it.
        reject(new HelperError(`function ${this.options.name} timed out after ${this.timeoutMs} ms`));
        controller.abort();
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([this.options.invoke(payload, { signal: controller.signal }), timeout]);
    } catch (error) {
      if (error instanceof HelperError) throw error;
      throw new HelperError(`function ${this.options.name} could not be invoked`, { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Lambda's error payload is `{errorType, errorMessage, ...}`; only the type is safe to repeat. */
function errorType(payload: Uint8Array | undefined): string | undefined {
  if (!payload) return undefined;
  try {
    const body: unknown = JSON.parse(new TextDecoder().decode(payload));
    if (body && typeof body === "object" && "errorType" in body && typeof body.errorType === "string") {
      return body.errorType;
    }
  } catch {
    // Not JSON: nothing more to report.
  }
  return undefined;
}
