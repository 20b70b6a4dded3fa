/**
 * The per-invocation wrapper every handler call runs in: the gate's first read is a store round
 * (nothing a warm container confirmed earlier is trusted), a request still buffered unconfirmed at
 * the end closes the broker connection, so it cannot leave at some later thaw, and the request id
 * is on every log line of the invocation.
 */
import type { AsyncLocalStorage } from "node:async_hooks";
import type { LeaseGate } from "../ports/lease-gate";
import type { LogAttributes, Logger } from "../ports/logger";
import type { Broker, InvocationContext } from "./use-case-ports";

export interface InvocationsDeps {
  gate: Pick<LeaseGate, "beginInvocation">;
  broker: Pick<Broker, "closeIfPublishPending">;
  logger: Logger;
  /** Request correlation carried into every log line of an invocation (see withInvocationAttributes). */
  attributes: AsyncLocalStorage<LogAttributes>;
}

export class Invocations {
  private active = 0;

  constructor(private readonly deps: InvocationsDeps) {}

  run<T>(ctx: InvocationContext, work: () => Promise<T>): Promise<T> {
    const attributes: LogAttributes = ctx.requestId ? { requestId: ctx.requestId } : {};
    return this.deps.attributes.run(attributes, async () => {
      // Lambda runs one invocation per container at a time; the local runtime and tests may overlap
      // them in one process, and what a running invocation confirmed is current for the others.
      if (this.active++ === 0) this.deps.gate.beginInvocation();
      try {
        return await work();
      } finally {
        if (--this.active === 0 && (await this.deps.broker.closeIfPublishPending().catch(() => false))) {
          this.deps.logger.warn("closed the broker connection: a request was still unconfirmed at the end of the invocation");
        }
      }
    });
  }
}

/** Adds the current invocation's attributes (request id) to every line, also under concurrency. */
export function withInvocationAttributes(logger: Logger, attributes: AsyncLocalStorage<LogAttributes>): Logger {
  const emit =
    (level: keyof Logger) =>
    (message: string, extra?: LogAttributes): void => {
      const current = attributes.getStore();
      logger[level](message, current && Object.keys(current).length > 0 ? { ...current, ...extra } : extra);
    };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
