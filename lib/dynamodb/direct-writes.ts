/**
 * The admission table's per-host writes (UpdateItem and DeleteItem of the registry, the issuance
 * ledger's PutItem), sent as the DynamoDB JSON request they are, without the AWS SDK's per-call
 * pipeline. Five of them run for every host provisioned, and the SDK's pipeline (its middlewares, several of which copy the client's whole
 * configuration, an endpoint rule evaluation and schema-driven serialisation per call) took about
 * as much CPU again as the request itself: 0.70-0.77 ms a call against 0.39-0.40 ms this way,
 * measured against DynamoDB Local (docs/behaviour.md §1).
 *
 * Everything that decides where and how a request goes is still the SDK client's: its credentials
 * provider (refreshed as it refreshes them), region, endpoint (a configured one, or the one its
 * endpoint rules give for the region, FIPS and dual-stack settings), clock offset (sampled from
 * every answer's Date header, as its signer does), retry strategy (attempts, backoff, retry quota)
 * and HTTP handler (timeouts, keep-alive). The request is signed by the SDK's own SigV4 signer. An
 * error is the SDK's: a failed condition is its ConditionalCheckFailedException carrying the stored
 * item, any other answer a DynamoDBServiceException named by DynamoDB's error type, and a transport
 * failure the handler's own error, so callers and the retry classification see what the SDK would
 * have thrown.
 *
 * Items are JSON as DynamoDB sends them: the tables this writes hold no binary attributes, which
 * the SDK would have turned into bytes.
 */
import { ConditionalCheckFailedException, DynamoDBServiceException, type AttributeValue, type DeleteItemCommandInput, type DynamoDBClient, type PutItemCommandInput, type UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { HttpRequest } from "@smithy/core/transport";
import { SignatureV4 } from "@smithy/signature-v4";
import type { RetryErrorInfo, RetryErrorType, RetryStrategyV2, RetryToken, SdkError } from "@smithy/types";

export interface DirectWriteOutput {
  Attributes?: Record<string, AttributeValue>;
}

type Operation = "UpdateItem" | "DeleteItem" | "PutItem";

/** Where requests go and what sends them, resolved once from the client's configuration. */
interface Route {
  protocol: string;
  hostname: string;
  port: number | undefined;
  path: string;
  host: string;
  signer: SignatureV4;
  retryStrategy: RetryStrategyV2;
}

export class DynamoDbDirectWrites {
  private route: Promise<Route> | undefined;

  constructor(private readonly client: DynamoDBClient) {}

  updateItem(input: UpdateItemCommandInput): Promise<DirectWriteOutput> {
    return this.send("UpdateItem", input);
  }

  deleteItem(input: DeleteItemCommandInput): Promise<DirectWriteOutput> {
    return this.send("DeleteItem", input);
  }

  putItem(input: PutItemCommandInput): Promise<DirectWriteOutput> {
    return this.send("PutItem", input);
  }

  private async send(operation: Operation, input: UpdateItemCommandInput | DeleteItemCommandInput | PutItemCommandInput): Promise<DirectWriteOutput> {
    const route = await this.resolvedRoute();
    const body = JSON.stringify(input);
    let token: RetryToken = await route.retryStrategy.acquireInitialRetryToken("");
    for (;;) {
      try {
        const output = await this.attempt(route, operation, body);
        route.retryStrategy.recordSuccess(token);
        return output;
      } catch (error) {
        if (!(error instanceof Error)) throw error;
        try {
          token = await route.retryStrategy.refreshRetryTokenForRetry(token, retryErrorInfo(error));
        } catch {
          throw error;
        }
        const delay = token.getRetryDelay();
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  private async attempt(route: Route, operation: Operation, body: string): Promise<DirectWriteOutput> {
    const { config } = this.client;
    const request = new HttpRequest({
      method: "POST",
      protocol: route.protocol,
      hostname: route.hostname,
      port: route.port,
      path: route.path,
      headers: {
        host: route.host,
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": `DynamoDB_20120810.${operation}`,
        "content-length": String(Buffer.byteLength(body)),
      },
      body,
    });
    const offsetBefore = config.systemClockOffset ?? 0;
    const signed = await route.signer.sign(request, { signingDate: new Date(Date.now() + offsetBefore) });
    const sentAt = Date.now();
    const { response } = await config.requestHandler.handle(signed as HttpRequest);
    const text = await readBody(response.body as AsyncIterable<Uint8Array> | undefined);
    const status = response.statusCode;
    const header = (name: string) => {
      const value = response.headers[name];
      return typeof value === "string" ? value : undefined;
    };
    const offset = sampleClockOffset(header("date"), header("age"), sentAt, offsetBefore);
    config.systemClockOffset = offset;
    const $metadata: { httpStatusCode: number; requestId?: string; clockSkewCorrected?: true } = { httpStatusCode: status, requestId: header("x-amzn-requestid") };
    const parsed = parseJson(text);
    if (status >= 200 && status < 300 && parsed !== undefined) return parsed as DirectWriteOutput;
    const fields = (parsed ?? {}) as { __type?: unknown; message?: unknown; Message?: unknown; Item?: Record<string, AttributeValue> };
    const type = typeof fields.__type === "string" ? fields.__type : header("x-amzn-errortype");
    const name = type?.split("#").pop()?.split(":")[0] || (status >= 200 && status < 300 ? "UndecodableResponse" : `HttpStatus${status}`);
    const message = typeof fields.message === "string" ? fields.message : typeof fields.Message === "string" ? fields.Message : `DynamoDB answered ${operation} with HTTP ${status}`;
    if (name === "ConditionalCheckFailedException") throw new ConditionalCheckFailedException({ message, $metadata, ...(fields.Item ? { Item: fields.Item } : {}) });
    // As the SDK's signer does: a refusal for a skewed clock, with the offset now corrected, is retried.
    if (CLOCK_SKEW_ERRORS.has(name) && Math.abs(offset) >= CLOCK_SKEW_RETRY_MS && offset !== offsetBefore) $metadata.clockSkewCorrected = true;
    throw new DynamoDBServiceException({ name, message, $fault: status >= 500 ? "server" : "client", $metadata });
  }

  private resolvedRoute(): Promise<Route> {
    this.route ??= resolveRoute(this.client).catch((error: unknown) => {
      // A client that could not resolve its region or endpoint may on the next call (no sticky failure).
      this.route = undefined;
      throw error;
    });
    return this.route;
  }
}

async function resolveRoute(client: DynamoDBClient): Promise<Route> {
  const { config } = client;
  const region = await config.region();
  let url: URL;
  if (config.isCustomEndpoint && config.endpoint) {
    const endpoint = await config.endpoint();
    url = new URL(`${endpoint.protocol}//${endpoint.hostname}${endpoint.port ? `:${endpoint.port}` : ""}${endpoint.path}`);
  } else {
    ({ url } = config.endpointProvider({ Region: region, UseFIPS: await config.useFipsEndpoint(), UseDualStack: await config.useDualstackEndpoint() }));
  }
  const retryStrategy = await config.retryStrategy();
  if (!("acquireInitialRetryToken" in retryStrategy)) throw new TypeError("the DynamoDB client's retry strategy is not a token-based (v2) strategy");
  return {
    protocol: url.protocol,
    hostname: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    path: url.pathname || "/",
    host: url.host,
    signer: new SignatureV4({ credentials: config.credentials, region, service: "dynamodb", sha256: config.sha256 }),
    retryStrategy,
  };
}

/** The errors by which AWS refuses a request signed at a time too far from its own. */
const CLOCK_SKEW_ERRORS = new Set(["AuthFailure", "InvalidSignatureException", "RequestExpired", "RequestInTheFuture", "RequestTimeTooSkewed", "SignatureDoesNotMatch"]);
/** The skew from which the SDK retries such a refusal once its clock offset is corrected. */
const CLOCK_SKEW_RETRY_MS = 240_000;
/** The SDK ignores a server time from an answer that took longer than this. */
const STALE_ANSWER_MS = 900_000;

/**
 * The client's clock offset from DynamoDB's `Date` header, as the SDK samples it on every answer:
 * not from a cached answer (`Age`) or one that took too long to mean anything.
 */
function sampleClockOffset(date: string | undefined, age: string | undefined, sentAt: number, current: number): number {
  if (date === undefined || age !== undefined) return current;
  const serverTime = Date.parse(date);
  const receivedAt = Date.now();
  if (Number.isNaN(serverTime) || receivedAt - sentAt > STALE_ANSWER_MS) return current;
  return serverTime - receivedAt;
}

/** As the SDK's retry middleware classifies a failed attempt. */
function retryErrorInfo(thrown: Error): RetryErrorInfo {
  // The SDK's classifiers read an error's $metadata, name, code and cause, whatever threw it.
  const error = thrown as SdkError;
  let errorType: RetryErrorType = "CLIENT_ERROR";
  if (isThrottlingError(error)) errorType = "THROTTLING";
  else if (isTransientError(error)) errorType = "TRANSIENT";
  else if (isServerError(error)) errorType = "SERVER_ERROR";
  return { error, errorType };
}

async function readBody(body: AsyncIterable<Uint8Array> | undefined): Promise<string> {
  if (!body) return "";
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function parseJson(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
