/** `provision` (SQS host-work queue, ReportBatchItemFailures): provisions each host whose work is current; only failed items are reported. */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { HostWorkProcessor } from "../../app/host-work";
import { functionUses } from "../../config/secrets";
import { DynamoDbIssuanceLedger } from "../../dynamodb/issuance-ledger";
import type { BrokerFunctionParts } from "../compose-broker";
import { composeEngine } from "../compose-engine";
import { wrapHandler } from "../middleware";
import { batchResponse, queueMessagesOf } from "../sqs-batch";
import { SqsBatchRefill } from "../sqs-batch-refill";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface ProvisionFunction {
  handleHostWorkBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  close(): Promise<void>;
}

/**
 * A worker takes more host work only while this much of the invocation is left: enough for one host
 * whose every RPC runs through its retries plus the helper's 10 s, so taken work is not cut off by
 * the deadline (it would wait out the queue's visibility timeout).
 */
const REFILL_STOP_BEFORE_DEADLINE_MS = 120_000;
/**
 * Workers take more only in the first 20 s of an invocation: taken work runs under the lease
 * standing read at its start, and 20 s stays inside one lease (30 s by default). It covers a
 * batch's tail, the seconds its slowest hosts take after the others.
 */
const REFILL_WINDOW_MS = 20_000;

/**
 * The function on its composed parts: its handler's (handlers/provision.ts) and the whole local
 * stack's. The only function that loads the engine, the JWT keys, the token and the helper runner;
 * the keys and the token only where its settings resolve them (a whole-stack composition for
 * another function's settings has an engine without them).
 */
export async function provisionFunction({ parts, broker, invocations }: BrokerFunctionParts): Promise<ProvisionFunction> {
  const engine = await composeEngine(parts, broker.rpc, functionUses(parts.settings.function, "jwt_signing_key"));
  const { settings } = parts;
  const hostWork = new HostWorkProcessor({
    settings: {
      deploymentId: parts.config.deploymentId,
      workers: parts.config.workers,
      retry: { baseDelaySeconds: settings.retryBaseDelaySeconds, maxDelaySeconds: settings.retryMaxDelaySeconds },
      failureLimit: settings.hostFailureLimit,
      deadlineMarginMs: settings.deadlineMarginMs,
      site: parts.config.site,
      ledgerRetentionMs: parts.config.ledgerRetentionMs,
    },
    gate: parts.gate,
    registry: parts.registry,
    engine,
    ledger: new DynamoDbIssuanceLedger({ client: parts.storeClient, tableName: settings.admissionTable }),
    broker,
    hostWork: parts.queues.hostWork,
    hostWorkDlq: parts.queues.hostWorkDlq,
    logger: parts.logger,
    metrics: parts.metrics,
    clock: parts.clock,
    refill: (remainingMs) =>
      new SqsBatchRefill({
        client: parts.sqsClient,
        queueUrl: settings.hostWorkQueueUrl,
        remainingMs,
        stopBeforeDeadlineMs: REFILL_STOP_BEFORE_DEADLINE_MS,
        windowMs: REFILL_WINDOW_MS,
        monotonic: () => parts.clock.monotonic(),
      }),
  });
  return { handleHostWorkBatch: (event, ctx) => invocations.run(ctx, async () => batchResponse(await hostWork.handle(queueMessagesOf(event), ctx))), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<ProvisionFunction>) {
  return wrapHandler(getFunction, (fn, event: SQSEvent, context): Promise<SQSBatchResponse> => fn.handleHostWorkBatch(event, context));
}
