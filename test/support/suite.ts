/**
 * Arrangements many suites make the same way: something started for the whole suite (or describe
 * block), such as a broker, cleanup steps a test registers as it arranges, and the error a call
 * must fail with.
 */
import { connect, type ConnectionOptions, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll } from "vitest";
import { startNats, type NatsOptions, type RunningNats } from "../../dev/local/services";

/**
 * `start()` before the first test of the suite or describe block this is called in, `stop` after
 * its last. The value returned stands for the started one in the tests and hooks (not before).
 */
export function startedForSuite<T extends object>(start: () => Promise<T>, stop: (started: T) => Promise<unknown>): T {
  let started: T | undefined;
  beforeAll(async () => {
    started = await start();
  });
  afterAll(async () => {
    if (started) await stop(started);
  });
  const current = (): T => {
    if (started === undefined) throw new Error("a suite's service is used before its beforeAll ran");
    return started;
  };
  return new Proxy({} as T, {
    get: (_target, key) => {
      const value: unknown = Reflect.get(current(), key);
      return typeof value === "function" ? value.bind(current()) : value;
    },
  });
}

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
  const { client, ...natsOptions } = options;
  return startedForSuite(
    async () => {
      const nats = await startNats(natsOptions);
      return { nats, nc: await connect({ servers: nats.url, ...client }) };
    },
    async ({ nats, nc }) => {
      await nc.close();
      await nats.stop();
    },
  );
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
