/**
 * Arrangements many suites make the same way: a broker for the suite (or describe block), cleanup
 * steps a test registers as it arranges, and the error a call must fail with.
 */
import { connect, type ConnectionOptions, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll } from "vitest";
import { startNats, type NatsOptions, type RunningNats } from "../../dev/local/services";

export interface SuiteBroker {
  /** The nats-server (JetStream on, a free loopback port). */
  readonly nats: RunningNats;
  /** One client connection to it. */
  readonly nc: NatsConnection;
}

/**
 * A nats-server and one client connection for the suite or describe block this is called in:
 * started before its first test, closed and stopped after its last.
 */
export function brokerForSuite(options: NatsOptions & { client?: Partial<ConnectionOptions> } = {}): SuiteBroker {
  let nats: RunningNats | undefined;
  let nc: NatsConnection | undefined;
  const { client, ...natsOptions } = options;
  beforeAll(async () => {
    nats = await startNats(natsOptions);
    nc = await connect({ servers: nats.url, ...client });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the suite's broker is used before its beforeAll ran");
    return value;
  };
  return {
    get nats() {
      return started(nats);
    },
    get nc() {
      return started(nc);
    },
  };
}

/** Cleanup steps the running test registers as it arranges; they run after it, last first, each even when another failed. */
export function cleanupsAfterEach(): { push(...steps: Array<() => Promise<unknown>>): void } {
  const steps: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const step of steps.splice(0).reverse()) await step().catch(() => undefined);
  });
  return { push: (...added) => void steps.push(...added) };
}

/** The error `promise` rejects with; fails the test when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected the call to fail");
}
