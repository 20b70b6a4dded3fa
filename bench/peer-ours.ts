/**
 * This project's provisioner for bench/peer.ts, in a process of its own so that its CPU and memory
 * can be read from /proc without the fleet's or the emulators' share: the local stack's deployment
 * (the real handlers under the emulated Lambda runtime, one App) with no fleet of its own, on the
 * benchmark's nats-server, DynamoDB Local and fauxqs (which run in other processes).
 *
 * It runs with the product's configuration defaults (no overrides) and the production logger.
 * Started with an IPC channel; settings in PEER_OURS (JSON, see OursSettings). Reports
 * `{ type: "ready" }` once its queues exist, starts its schedules and pollers on `{ type: "start" }`
 * and stops on `{ type: "stop" }`. On `{ type: "stages" }` it answers with each host's timestamps of
 * its own steps (bench/stages.ts) and the DynamoDB round trips it made, by operation.
 *
 * The Apps reach DynamoDB and SQS directly, as on AWS: the local stack's counting proxies would add
 * an HTTP hop per request to this process's CPU. Admissions are seen at the queue instead (the
 * benchmark reads fauxqs's message spy), and DynamoDB round trips through Node's HTTP client
 * diagnostics channels.
 */
import { subscribe } from "node:diagnostics_channel";
import type { ClientRequest, IncomingMessage } from "node:http";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { decodeHex } from "../lib/crypto/encoding";
import { ed25519SigningKey } from "../test/support/choria-node/keys";
import { LOCAL_AWS, type RunningNats, type RunningSqs } from "../dev/local/services";
import { startLocalStack } from "../dev/local/stack";
import { createLogger } from "../lib/aws/powertools-logger";
import type { Logger } from "../lib/ports/logger";
import type { HostStamps } from "./stages";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

export interface OursSettings {
  natsUrl: string;
  natsPort: number;
  dynamoDbUrl: string;
  sqsUrl: string;
  signerSeedHex: string;
  maxConcurrency: number;
  workers: number;
  helper: string;
}

export type OursReport =
  | { type: "ready" }
  | { type: "stages"; hosts: Array<[string, HostStamps]>; dynamoDb: Array<[string, number[]]> }
  | { type: "stopped" };

const send = (report: OursReport) => process.send?.(report);

/**
 * fauxqs in another process, reached over its SQS API. The stack names queues synchronously, so
 * this answers with fauxqs's URL (prefix learnt from a probe queue) and ARN scheme at once and creates the queues in order (each DLQ
 * before the queue whose RedrivePolicy names it); `ready()` waits for them and checks the URLs.
 */
async function remoteSqs(url: string): Promise<RunningSqs & { ready(): Promise<void> }> {
  const client = new SQSClient({ ...LOCAL_AWS, endpoint: url });
  // fauxqs names queues by its configured host, not the address asked; learn the prefix once.
  const probe = await client.send(new CreateQueueCommand({ QueueName: "peer-bench-probe" }));
  const prefix = probe.QueueUrl?.replace(/peer-bench-probe$/, "");
  if (!prefix) throw new Error(`fauxqs at ${url} returned no queue URL`);
  let created: Promise<void> = Promise.resolve();
  const createQueueWithArn = (name: string, attributes?: Record<string, string>) => {
    const expected = `${prefix}${name}`;
    created = created.then(async () => {
      const reply = await client.send(new CreateQueueCommand({ QueueName: name, ...(attributes ? { Attributes: attributes } : {}) }));
      if (reply.QueueUrl !== expected) throw new Error(`fauxqs named queue ${name} ${reply.QueueUrl}, expected ${expected}`);
    });
    return { url: expected, arn: `arn:aws:sqs:${LOCAL_AWS.region}:000000000000:${name}` };
  };
  return {
    url,
    createQueue: (name, attributes) => createQueueWithArn(name, attributes).url,
    createQueueWithArn,
    ready: () => created,
    stop: async () => client.destroy(),
  };
}

function sharedNats(url: string, port: number): RunningNats {
  return {
    url,
    port,
    pid: undefined,
    restart: () => Promise.reject(new Error("the benchmark's broker is not restarted from here")),
    stop: () => Promise.resolve(),
  };
}

/**
 * The production logger (Powertools JSON at info, to stdout, which the benchmark drains from a pipe
 * as Lambda's runtime does) and the stamping one: ours pays for its logging as on AWS, and the
 * stages still get their timestamps.
 */
function teeLogger(...loggers: Logger[]): Logger {
  const each =
    (level: keyof Logger): Logger[keyof Logger] =>
    (message, attributes) => {
      for (const logger of loggers) logger[level](message, attributes);
    };
  return { debug: each("debug"), info: each("info"), warn: each("warn"), error: each("error") };
}

/** Stamps per host from the engine's log lines (the only ones it reads). */
function stampingLogger(stamps: (identity: string) => HostStamps): Logger {
  const ignore = () => undefined;
  return {
    debug: ignore,
    warn: ignore,
    error: ignore,
    info: (message, attributes) => {
      const identity = attributes?.identity;
      if (typeof identity !== "string") return;
      if (message === `Provisioning ${identity}`) stamps(identity).provisioningAt = Date.now();
      else if (message === "Configuring node") stamps(identity).configuringAt = Date.now();
    },
  };
}

/**
 * DynamoDB round trips per operation, from Node's HTTP client diagnostics channels: a request is
 * published once its body is handed over, and timed to the end of its response. One entry per
 * HTTP attempt, as a proxy would count them.
 */
function timeDynamoDbRequests(dynamoDb: Map<string, number[]>): void {
  const startedAt = new WeakMap<ClientRequest, { operation: string; at: number }>();
  subscribe("http.client.request.start", (message) => {
    const { request } = message as { request: ClientRequest };
    const target = request.getHeader("x-amz-target");
    if (typeof target !== "string" || !target.startsWith("DynamoDB_")) return;
    startedAt.set(request, { operation: target.slice(target.indexOf(".") + 1), at: performance.now() });
  });
  subscribe("http.client.response.finish", (message) => {
    const { request, response } = message as { request: ClientRequest; response: IncomingMessage };
    const started = startedAt.get(request);
    if (!started) return;
    response.once("end", () => {
      const list = dynamoDb.get(started.operation) ?? [];
      list.push(performance.now() - started.at);
      dynamoDb.set(started.operation, list);
    });
  });
}

async function main(): Promise<void> {
  const settings = JSON.parse(process.env.PEER_OURS ?? "{}") as OursSettings;
  const sqs = await remoteSqs(settings.sqsUrl);
  const hosts = new Map<string, HostStamps>();
  const stamps = (identity: string) => {
    let entry = hosts.get(identity);
    if (!entry) hosts.set(identity, (entry = {}));
    return entry;
  };
  const dynamoDb = new Map<string, number[]>();
  timeDynamoDbRequests(dynamoDb);
  const stack = await startLocalStack({
    countingProxies: false,
    nodes: 0,
    nats: sharedNats(settings.natsUrl, settings.natsPort),
    sqs,
    dynamoDbEndpoint: settings.dynamoDbUrl,
    provisioningSigner: ed25519SigningKey(decodeHex(settings.signerSeedHex)),
    helper: { command: settings.helper },
    maxConcurrency: settings.maxConcurrency,
    workers: settings.workers,
    // Lambda's pollers long-poll 20 s; a stop aborts the waiting receives.
    waitTimeSeconds: 20,
    logger: teeLogger(createLogger(), stampingLogger(stamps)),
    onDelivery: ({ functionName, records, invokedAt, returnedAt }) => {
      if (!functionName.endsWith("-provision")) return;
      for (const record of records) {
        const work = JSON.parse(record.body) as { identity?: string; admittedAt?: number };
        if (!work.identity) continue;
        const entry = stamps(work.identity);
        // The delivery that provisioned the host is the last one to begin before its provisioning did.
        if (entry.provisioningAt !== undefined && invokedAt > entry.provisioningAt) continue;
        Object.assign(entry, { admittedAt: work.admittedAt, sentAt: Number(record.attributes.SentTimestamp), invokedAt, returnedAt });
      }
    },
  });
  await sqs.ready();
  send({ type: "ready" });

  process.on("message", (message: { type?: string }) => {
    if (message.type === "start") {
      // Only the run's own round trips: table creation and the like came before.
      dynamoDb.clear();
      stack.start();
    }
    if (message.type === "stages") send({ type: "stages", hosts: [...hosts], dynamoDb: [...dynamoDb] });
    if (message.type === "stop") {
      void stack.stop().finally(() => {
        send({ type: "stopped" });
        process.exit(0);
      });
    }
  });
  process.on("disconnect", () => void stack.stop().finally(() => process.exit(0)));
}

main().catch((error: unknown) => {
  process.stderr.write(`peer ours: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
