/**
 * What `sls deploy` gives a stage with the default params, read from serverless.yml itself so the
 * local stack runs with the same function timeouts and memory, SQS batch sizes and concurrency,
 * visibility timeouts and redrive counts, and cannot drift from them (`--fast` deviates on purpose,
 * dev/local/stack.ts FAST_TIMINGS).
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const SERVERLESS_FILE = resolve(fileURLToPath(new URL("../../serverless.yml", import.meta.url)));

export type DeployedFunction = "discover" | "leaseKeeper" | "lifecycle" | "provision" | "renew";

interface FunctionDefaults {
  timeoutMs: number;
  memoryMb: number;
  /** `rate(N minutes)` of a scheduled function, when it is a literal rate. */
  rateMs?: number;
}

export interface QueueDefaults {
  visibilitySeconds: number;
  maxReceiveCount: number;
  /** The SQS event source mapping of the function the queue feeds. */
  batchSize: number;
  maxConcurrency: number;
}

export interface DeployedDefaults {
  functions: Record<DeployedFunction, FunctionDefaults>;
  hostWork: QueueDefaults;
  lifecycle: QueueDefaults;
  deadLetterRetentionSeconds: number;
}

interface ServerlessFile {
  params: { default: Record<string, unknown> };
  provider: { timeout: number; memorySize: number };
  functions: Record<string, { timeout?: number; memorySize?: number; events?: Array<Record<string, Record<string, unknown>>> }>;
  resources: Array<{ Resources?: Record<string, { Properties: Record<string, unknown> }> } | string>;
}

/** Reads the deployed defaults from a serverless.yml (default: the repository's). */
export function readDeployedDefaults(file: string = SERVERLESS_FILE): DeployedDefaults {
  // CloudFormation tags (!GetAtt) are kept as plain values: only literal settings are read here.
  const sls = parse(readFileSync(file, "utf8"), { logLevel: "error" }) as ServerlessFile;
  const param = (value: unknown): unknown => {
    const match = typeof value === "string" ? /^\$\{param:(\w+)\}$/.exec(value) : null;
    return match ? sls.params.default[match[1] as string] : value;
  };
  const number = (value: unknown, what: string): number => {
    const resolved = Number(param(value));
    if (!Number.isFinite(resolved)) throw new Error(`${file}: ${what} is not a number (${String(value)})`);
    return resolved;
  };
  const resources = Object.assign({}, ...sls.resources.map((entry) => (typeof entry === "object" ? entry.Resources : {}))) as Record<
    string,
    { Properties: Record<string, unknown> }
  >;

  const fn = (name: DeployedFunction): FunctionDefaults => {
    const spec = sls.functions[name];
    if (!spec) throw new Error(`${file}: no function ${name}`);
    const rate = spec.events?.flatMap((event) => (event.schedule ? [event.schedule.rate] : [])).flat()[0];
    const minutes = typeof rate === "string" ? /^rate\((\d+) minutes?\)$/.exec(rate)?.[1] : undefined;
    return {
      timeoutMs: number(spec.timeout ?? sls.provider.timeout, `${name}.timeout`) * 1000,
      memoryMb: number(spec.memorySize ?? sls.provider.memorySize, `${name}.memorySize`),
      ...(minutes === undefined ? {} : { rateMs: Number(minutes) * 60_000 }),
    };
  };
  const queue = (resource: string, consumer: DeployedFunction): QueueDefaults => {
    const properties = resources[resource]?.Properties;
    const source = sls.functions[consumer]?.events?.find((event) => event.sqs)?.sqs;
    if (!properties || !source) throw new Error(`${file}: no ${resource} feeding ${consumer}`);
    return {
      visibilitySeconds: number(properties.VisibilityTimeout, `${resource}.VisibilityTimeout`),
      maxReceiveCount: number((properties.RedrivePolicy as Record<string, unknown>).maxReceiveCount, `${resource}.maxReceiveCount`),
      batchSize: number(source.batchSize, `${consumer}.batchSize`),
      maxConcurrency: number(source.maximumConcurrency, `${consumer}.maximumConcurrency`),
    };
  };

  return {
    functions: {
      discover: fn("discover"),
      leaseKeeper: fn("leaseKeeper"),
      lifecycle: fn("lifecycle"),
      provision: fn("provision"),
      renew: fn("renew"),
    },
    hostWork: queue("HostWorkQueue", "provision"),
    lifecycle: queue("LifecycleQueue", "lifecycle"),
    deadLetterRetentionSeconds: number(resources.HostWorkDeadLetterQueue?.Properties.MessageRetentionPeriod, "HostWorkDeadLetterQueue.MessageRetentionPeriod"),
  };
}
