/**
 * The provisioner's broker connection (docs/protocol.md §10) and the one piece of traffic it sends on
 * its own behalf: its startup lifecycle event (§8).
 *
 * Lambda keeps module state between warm invocations, so SharedBrokerConnection holds one
 * connection per container and checks it before each use: a connection that was closed, or that
 * cannot round-trip a PING within a short bound (frozen container, broker restart), is replaced.
 * Passwords and tokens are handed to nats.js only; they never appear in errors or logs.
 */
import { connect, type NatsConnection } from "nats";
import { BrokerConnectionError } from "../errors";
import { type Clock, systemClock } from "../ports/clock";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../choria/lifecycle";
import { connectionOptions, type BrokerConnectionSettings } from "./connection-options";

/** NATS errors can echo server text; only the code and a generic description are kept. */
function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "connection failed";
}

async function connectBroker(settings: BrokerConnectionSettings): Promise<NatsConnection> {
  const options = connectionOptions(settings);
  try {
    return await connect(options);
  } catch (error) {
    throw new BrokerConnectionError(`could not connect to ${(options.servers as string[]).join(",")}: ${describe(error)}`, {
      cause: error,
    });
  }
}

export interface SharedBrokerConnectionOptions {
  /** How long a health-check flush may take before the connection counts as dead; default 1000 ms. */
  healthCheckTimeoutMs?: number;
  /** Replaceable for tests; defaults to connectBroker. */
  connector?: (settings: BrokerConnectionSettings) => Promise<NatsConnection>;
}

/**
 * One broker connection per Lambda container. `get()` returns a connection that answered a PING
 * just now; concurrent callers share one connect attempt.
 */
export class SharedBrokerConnection {
  private current: NatsConnection | undefined;
  private pending: Promise<NatsConnection> | undefined;
  private readonly healthCheckTimeoutMs: number;
  private readonly connector: (settings: BrokerConnectionSettings) => Promise<NatsConnection>;

  constructor(
    private readonly settings: BrokerConnectionSettings,
    options: SharedBrokerConnectionOptions = {},
  ) {
    this.healthCheckTimeoutMs = options.healthCheckTimeoutMs ?? 1_000;
    this.connector = options.connector ?? connectBroker;
  }

  async get(): Promise<NatsConnection> {
    this.pending ??= this.obtain().finally(() => (this.pending = undefined));
    return this.pending;
  }

  /** Closes the held connection (container shutdown, tests). */
  async close(): Promise<void> {
    const connection = this.current;
    this.current = undefined;
    if (connection && !connection.isClosed()) await connection.close();
  }

  private async obtain(): Promise<NatsConnection> {
    const existing = this.current;
    if (existing && (await this.healthy(existing))) return existing;
    this.current = undefined;
    if (existing && !existing.isClosed()) {
      await existing.close().catch(() => undefined);
    }
    this.current = await this.connector(this.settings);
    return this.current;
  }

  private async healthy(connection: NatsConnection): Promise<boolean> {
    if (connection.isClosed()) return false;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.healthCheckTimeoutMs)));
    try {
      return await Promise.race([connection.flush().then(() => true, () => false), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}

export interface StartupEventInput {
  identity: string;
  version: string;
  timestampMs?: number;
  clock?: Clock;
}

/** The provisioner's own startup event, Choria format, component `provisioner` (as Go sends it). */
export async function publishStartupEvent(nc: NatsConnection, input: StartupEventInput): Promise<void> {
  const event = buildLifecycleEvent({
    type: "startup",
    identity: input.identity,
    component: "provisioner",
    version: input.version,
    timestampMs: input.timestampMs ?? (input.clock ?? systemClock).now(),
  });
  nc.publish(lifecycleSubject("startup", "provisioner"), encodeLifecycleEvent(event, "choria"));
  await nc.flush();
}
