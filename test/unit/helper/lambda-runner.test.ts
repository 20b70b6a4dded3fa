import { describe, expect, it } from "vitest";
import { handler } from "../../../examples/helpers/lambda-helper";
import { HelperError } from "../../../lib/errors";
import { LambdaHelperRunner, type HelperInvoke } from "../../../lib/helper/lambda-runner";
import type { HelperRequest } from "../../../lib/ports/helper";

const encoder = new TextEncoder();

function request(identity: string, overrides: Partial<HelperRequest> = {}): HelperRequest {
  return { identity, csr: null, ed25519_pubkey: null, inventory: "{}", jwt: { cht: "claim-token-value" }, ...overrides };
}

/** Calls the example Lambda handler in-process the way Lambda Invoke would: JSON bytes in and out. */
const invokeExampleHandler: HelperInvoke = async (payload) => {
  try {
    const result = await handler(JSON.parse(new TextDecoder().decode(payload)));
    return { payload: encoder.encode(JSON.stringify(result)), statusCode: 200 };
  } catch (error) {
    const body = { errorType: (error as Error).name, errorMessage: (error as Error).message };
    return { payload: encoder.encode(JSON.stringify(body)), functionError: "Unhandled", statusCode: 200 };
  }
};

async function helperErrorOf(promise: Promise<unknown>): Promise<HelperError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (error instanceof HelperError) return error;
  throw new Error(`expected a HelperError, got ${String(error)}`);
}

describe("LambdaHelperRunner with the example Lambda handler", () => {
  const runner = new LambdaHelperRunner({ invoke: invokeExampleHandler, name: "example-helper" });

  it("returns the configuration for a normal node", async () => {
    // Act
    const response = await runner.run(
      request("n1.example.net", { ed25519_pubkey: { public_key: "aa", directory: "/etc/choria", signature: "bb" } }),
    );

    // Assert
    expect(response.defer).toBe(false);
    expect(response.shutdown).toBe(false);
    expect(response.configuration.identity).toBe("n1.example.net");
    expect(response.configuration["plugin.choria.server.provision"]).toBe("false");
    expect(response.configuration["plugin.security.provider"]).toBe("choria");
    expect(response.configuration["plugin.security.choria.token_file"]).toBe("/etc/choria/server.jwt");
  });

  it("defers identities starting with defer-", async () => {
    // Act
    const response = await runner.run(request("defer-n2.example.net"));

    // Assert
    expect(response.defer).toBe(true);
    expect(response.msg).toContain("defer-n2.example.net");
  });

  it("asks to shut down identities starting with shutdown-", async () => {
    // Act
    const response = await runner.run(request("shutdown-n3.example.net"));

    // Assert
    expect(response.shutdown).toBe(true);
  });

  it("sends the same JSON the process helper gets on stdin", async () => {
    // Arrange
    let sent = "";
    const recording = new LambdaHelperRunner({
      name: "recording",
      invoke: async (payload, options) => {
        sent = new TextDecoder().decode(payload);
        return invokeExampleHandler(payload, options);
      },
    });

    // Act
    await recording.run(request("n4.example.net"));

    // Assert
    expect(Object.keys(JSON.parse(sent))).toEqual(["identity", "csr", "ed25519_pubkey", "inventory", "jwt"]);
  });
});

describe("LambdaHelperRunner failures", () => {
  it("a FunctionError is a HelperError carrying the error type but not the message", async () => {
    // Arrange
    const runner = new LambdaHelperRunner({
      name: "failing",
      invoke: async () => ({
        functionError: "Unhandled",
        statusCode: 200,
        payload: encoder.encode(JSON.stringify({ errorType: "TypeError", errorMessage: "claim-token-value leaked" })),
      }),
    });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("Unhandled");
    expect(error.message).toContain("TypeError");
    expect(error.message).not.toContain("claim-token-value");
  });

  it("a non-2xx status is a HelperError", async () => {
    // Arrange
    const runner = new LambdaHelperRunner({ name: "throttled", invoke: async () => ({ statusCode: 429 }) });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("429");
  });

  it("an invoke that throws is a HelperError with the cause kept", async () => {
    // Arrange
    const cause = new Error("ResourceNotFoundException");
    const runner = new LambdaHelperRunner({ name: "missing", invoke: async () => Promise.reject(cause) });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.cause).toBe(cause);
  });

  it("an empty payload is the zero-bytes error", async () => {
    // Arrange
    const runner = new LambdaHelperRunner({ name: "empty", invoke: async () => ({ statusCode: 200 }) });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("zero bytes");
  });

  it("an oversized payload is rejected", async () => {
    // Arrange
    const runner = new LambdaHelperRunner({
      name: "big",
      maxOutputBytes: 16,
      invoke: async () => ({ statusCode: 200, payload: encoder.encode(JSON.stringify({ msg: "x".repeat(64) })) }),
    });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("output too large");
  });

  it("times out and aborts the invocation", async () => {
    // Arrange
    let aborted = false;
    const runner = new LambdaHelperRunner({
      name: "slow",
      timeoutMs: 20,
      invoke: (_payload, { signal }) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
            resolve({ statusCode: 200 });
          });
        }),
    });

    // Act
    const error = await helperErrorOf(runner.run(request("n1")));

    // Assert
    expect(error.message).toContain("timed out");
    expect(aborted).toBe(true);
  });
});
