import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startCountingProxy, type CountingProxy } from "../../../dev/local/request-counter";

let upstream: Server | undefined;
let proxy: CountingProxy | undefined;

afterEach(async () => {
  await proxy?.stop();
  await new Promise<void>((done) => (upstream ? upstream.close(() => done()) : done()));
  upstream = proxy = undefined;
});

/** A loopback server standing in for the emulator: it answers at once and notes when each request reached it. */
async function emulator(arrivals: number[]): Promise<string> {
  upstream = createServer((incoming, outgoing) => {
    arrivals.push(performance.now());
    incoming.resume();
    incoming.on("end", () => outgoing.end("{}"));
  });
  await new Promise<void>((done) => upstream!.listen(0, "127.0.0.1", done));
  return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

function post(url: string, operation: string): Promise<number> {
  return new Promise((done, fail) => {
    const sent = request(url, { method: "POST", headers: { "x-amz-target": `DynamoDB_20120810.${operation}` } }, (reply) => {
      reply.resume();
      reply.on("end", () => done(reply.statusCode ?? 0));
    });
    sent.on("error", fail);
    sent.end("{}");
  });
}

describe("the counting proxy", () => {
  it("with a delay, forwards each request no sooner than the delay after it arrived, and still counts it", async () => {
    // Arrange
    const arrivals: number[] = [];
    proxy = await startCountingProxy({ target: await emulator(arrivals), delayMs: 200 });

    // Act
    const sentAt = performance.now();
    const status = await post(proxy.url, "UpdateItem");

    // Assert: a lower bound, which load on the machine can only lengthen (less 1 ms: timers run on
    // the event loop's whole-millisecond clock, read when the loop last turned).
    expect(status).toBe(200);
    expect(arrivals).toHaveLength(1);
    expect(arrivals[0]! - sentAt).toBeGreaterThanOrEqual(199);
    expect(proxy.operations.get("UpdateItem")).toBe(1);
  });
});
