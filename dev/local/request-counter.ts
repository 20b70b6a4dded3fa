/**
 * A counting HTTP proxy in front of a local AWS emulator. The Apps build their own SDK clients from
 * the environment (DYNAMODB_ENDPOINT, SQS_ENDPOINT), so the local run and the benchmark count their
 * requests here, by the JSON protocol's `X-Amz-Target` operation, without reaching into the App.
 * SQS messages sent are counted from the request bodies, and every host-work message can be
 * observed (the benchmark takes admission times from them). The HTTP bytes both ways are counted
 * too: what a VPC endpoint or NAT gateway would process of them (bench:cost), bar TLS.
 */
import { request as httpRequest, createServer, type IncomingMessage, type ServerResponse } from "node:http";

export interface ObservedRequest {
  /** Operation name without the service prefix, e.g. `UpdateItem`, `SendMessageBatch`. */
  operation: string;
  body: string;
}

export interface ObservedReply {
  operation: string;
  status: number;
  /** From the request reaching the proxy to the end of the emulator's reply. */
  ms: number;
}

export interface TrafficCounts {
  /** Requests per operation. */
  readonly operations: Map<string, number>;
  /** SQS messages in SendMessage / SendMessageBatch requests, per queue URL. */
  readonly messagesSent: Map<string, number>;
  total(): number;
  /** HTTP bytes of requests and replies, heads and bodies (plain HTTP here; TLS framing is not counted). */
  bytes(): number;
}

export interface CountingProxy extends TrafficCounts {
  readonly url: string;
  /**
   * From now on, requests get no answer (held until stop): what the services see of a crashed or
   * partitioned client. Nothing is forwarded or counted any more.
   */
  block(): void;
  stop(): Promise<void>;
}

/** Several proxies' counts as one (every deployment's traffic together). */
export function mergedTraffic(parts: () => readonly TrafficCounts[]): TrafficCounts {
  const merge = (pick: (part: TrafficCounts) => Map<string, number>) => {
    const merged = new Map<string, number>();
    for (const part of parts()) for (const [key, count] of pick(part)) merged.set(key, (merged.get(key) ?? 0) + count);
    return merged;
  };
  return {
    get operations() {
      return merge((part) => part.operations);
    },
    get messagesSent() {
      return merge((part) => part.messagesSent);
    },
    total: () => parts().reduce((sum, part) => sum + part.total(), 0),
    bytes: () => parts().reduce((sum, part) => sum + part.bytes(), 0),
  };
}

/** The size of an HTTP/1.1 message head: its first line, `name: value` lines and the blank line. */
function headBytes(firstLine: string, rawHeaders: readonly string[]): number {
  return rawHeaders.reduce((sum, item) => sum + Buffer.byteLength(item) + 2, Buffer.byteLength(firstLine) + 4);
}

export interface CountingProxyOptions {
  target: string;
  /** Called for every request after it was forwarded (for observing message bodies). */
  observe?: (request: ObservedRequest) => void;
  /** Called when the emulator's reply to a request has been passed on (bench: round-trip times per operation). */
  observeReply?: (reply: ObservedReply) => void;
  /** Holds every request this long before forwarding it: a slow store (bench:peer --store-delay-ms). */
  delayMs?: number;
}

export async function startCountingProxy(options: CountingProxyOptions): Promise<CountingProxy> {
  const target = new URL(options.target);
  const operations = new Map<string, number>();
  const messagesSent = new Map<string, number>();
  let bytes = 0;

  let blocked = false;
  const server = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
    if (blocked) return;
    const arrived = performance.now();
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      if (blocked) return;
      const body = Buffer.concat(chunks);
      const targetHeader = incoming.headers["x-amz-target"];
      const operation = typeof targetHeader === "string" ? targetHeader.slice(targetHeader.indexOf(".") + 1) : "unknown";
      operations.set(operation, (operations.get(operation) ?? 0) + 1);
      bytes += headBytes(`${incoming.method} ${incoming.url} HTTP/1.1`, incoming.rawHeaders) + body.length;
      if (operation === "SendMessage" || operation === "SendMessageBatch") countMessages(operation, body, messagesSent);
      const forward = () => {
        if (blocked) return;
        const request = httpRequest(
          {
            host: target.hostname,
            port: target.port,
            method: incoming.method,
            path: incoming.url,
            headers: incoming.headers,
          },
          (reply) => {
            outgoing.writeHead(reply.statusCode ?? 502, reply.headers);
            bytes += headBytes(`HTTP/1.1 ${reply.statusCode} ${reply.statusMessage ?? ""}`, reply.rawHeaders);
            reply.on("data", (chunk: Buffer) => {
              bytes += chunk.length;
            });
            reply.pipe(outgoing);
            if (options.observeReply) {
              const observeReply = options.observeReply;
              reply.once("end", () => observeReply({ operation, status: reply.statusCode ?? 502, ms: performance.now() - arrived }));
            }
          },
        );
        request.on("error", (error) => {
          if (!outgoing.headersSent) outgoing.writeHead(502, { "content-type": "text/plain" });
          outgoing.end(`proxy: ${error.message}`);
        });
        request.end(body);
        options.observe?.({ operation, body: body.toString("utf8") });
      };
      if (options.delayMs) setTimeout(forward, options.delayMs);
      else forward();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    operations,
    messagesSent,
    total: () => [...operations.values()].reduce((a, b) => a + b, 0),
    bytes: () => bytes,
    block: () => {
      blocked = true;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function countMessages(operation: string, body: Buffer, messagesSent: Map<string, number>): void {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as { QueueUrl?: string; Entries?: unknown[] };
    const queue = parsed.QueueUrl ?? "unknown";
    const count = operation === "SendMessage" ? 1 : (parsed.Entries?.length ?? 0);
    messagesSent.set(queue, (messagesSent.get(queue) ?? 0) + count);
  } catch {
    // Not JSON: not the SQS JSON protocol; counted as a request only.
  }
}

const DYNAMODB_WRITES = new Set(["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"]);
const DYNAMODB_READS = new Set(["GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"]);

/** DynamoDB requests split into writes and reads (control-plane calls are neither). */
export function dynamoDbSplit(operations: Map<string, number>): { writes: number; reads: number; other: number } {
  let writes = 0;
  let reads = 0;
  let other = 0;
  for (const [operation, count] of operations) {
    if (DYNAMODB_WRITES.has(operation)) writes += count;
    else if (DYNAMODB_READS.has(operation)) reads += count;
    else other += count;
  }
  return { writes, reads, other };
}
