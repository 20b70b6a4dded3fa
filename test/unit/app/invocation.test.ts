import { AsyncLocalStorage } from "node:async_hooks";
import { describe, expect, it } from "vitest";
import { Invocations, withInvocationAttributes } from "../../../lib/app/invocation";
import type { LogAttributes } from "../../../lib/ports/logger";
import { FakeBroker, RecordingLogger } from "../../support/fakes";
import { context } from "./support";

function invocations() {
  const gate = {
    begun: 0,
    beginInvocation() {
      this.begun++;
    },
  };
  const broker = new FakeBroker();
  const recorded = new RecordingLogger();
  const attributes = new AsyncLocalStorage<LogAttributes>();
  const logger = withInvocationAttributes(recorded, attributes);
  return { gate, broker, recorded, logger, wrapper: new Invocations({ gate, broker, logger, attributes }) };
}

describe("the per-invocation wrapper", () => {
  it("begins an invocation at the gate once for invocations that overlap, and again for the next one", async () => {
    // Arrange
    const { gate, wrapper } = invocations();
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));

    // Act
    const first = wrapper.run(context(), () => blocked);
    const second = wrapper.run(context(), async () => undefined);
    await second;
    release();
    await first;
    await wrapper.run(context(), async () => undefined);

    // Assert
    expect(gate.begun).toBe(2);
  });

  it("puts the request id on every line logged during the invocation, and only then", async () => {
    // Arrange
    const { recorded, logger, wrapper } = invocations();

    // Act
    await wrapper.run(context(60_000, "req-1"), async () => logger.info("inside", { identity: "a.example.net" }));
    logger.info("outside");

    // Assert
    expect(recorded.records).toEqual([
      { level: "info", message: "inside", attributes: { requestId: "req-1", identity: "a.example.net" } },
      { level: "info", message: "outside", attributes: undefined },
    ]);
  });

  it("closes the broker connection when a request is still unconfirmed at the end, also when the work threw", async () => {
    // Arrange
    const { broker, recorded, wrapper } = invocations();
    broker.publishPending = true;

    // Act
    const outcome = await wrapper.run(context(), async () => Promise.reject(new Error("boom"))).catch((error: Error) => error.message);
    const clean = await wrapper.run(context(), async () => "done");

    // Assert
    expect(outcome).toBe("boom");
    expect(clean).toBe("done");
    expect(broker.closes).toBe(1);
    expect(recorded.at("warn").map((line) => line.message)).toEqual([
      "closed the broker connection: a request was still unconfirmed at the end of the invocation",
    ]);
  });
});
