import { describe, expect, it } from "vitest";
import { RpcRetriesExhaustedError } from "../../../lib/engine/errors";
import { causesOf, HelperError, LeaseStoreError, messageOf, RpcTransportError, withCauseChain } from "../../../lib/errors";
import { createConsoleLogger } from "../../../dev/local/console-logger";

/** What the AWS SDK throws: the exception is the error's name, the text its message. */
function awsError(name: string, message: string, options?: { cause?: unknown }): Error {
  const error = new Error(message, options);
  error.name = name;
  return error;
}

/** What Node's HTTP client throws for a refused connection to a dual-stack host: no message of its own. */
function refused(): AggregateError {
  const inner = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8000"), { code: "ECONNREFUSED" });
  return Object.assign(new AggregateError([inner], ""), { code: "ECONNREFUSED" });
}

describe("messageOf", () => {
  it.each([
    ["a refused connection", refused(), "connect ECONNREFUSED 127.0.0.1:8000"],
    ["a denied role", awsError("AccessDeniedException", "User: arn:aws:sts::1:assumed-role/x is not authorized"), "AccessDeniedException: User: arn:aws:sts::1:assumed-role/x is not authorized"],
    ["throttling", awsError("ThrottlingException", "Rate exceeded"), "ThrottlingException: Rate exceeded"],
  ])("keeps %s under the error that wraps it", (_what, cause, expected) => {
    // Arrange
    const error = new LeaseStoreError("the lease store for site local could not be reached", { cause });

    // Act
    const message = messageOf(error);

    // Assert
    expect(message).toBe(`the lease store for site local could not be reached: ${expected}`);
  });

  it("follows the whole chain and does not repeat a cause the message already carries", () => {
    // Arrange
    const root = awsError("TimeoutError", "socket hang up");
    const middle = new HelperError(`could not invoke configure helper: ${root.name}: ${root.message}`, { cause: root });
    const top = new Error("provisioning failed", { cause: middle });

    // Act
    const message = messageOf(top);

    // Assert
    expect(message).toBe("provisioning failed: could not invoke configure helper: TimeoutError: socket hang up");
  });

  it("does not repeat a parse error's text, which quotes the input", () => {
    // Arrange
    let parseError: unknown;
    try {
      JSON.parse('{"token": "from-the-message-body"');
    } catch (error) {
      parseError = error;
    }
    const error = new Error("invalid host-work message: not JSON", { cause: parseError });

    // Act
    const message = messageOf(error);

    // Assert
    expect(message).toBe("invalid host-work message: not JSON");
  });

  it.each([
    ["an object with no message", { reason: 1 }, "the bridge run failed: TimeoutError: The operation was aborted."],
    ["an object with a message", { message: "deadline passed" }, "the bridge run failed: TimeoutError: The operation was aborted.: deadline passed"],
    ["a string", "deadline passed", "the bridge run failed: TimeoutError: The operation was aborted.: deadline passed"],
  ])("describes a cause that is not an Error (%s) by what it says, never as [object Object]", (_what, reason, expected) => {
    // Arrange: an abort whose cause is the signal's reason, as an aborted request carries it.
    const aborted = Object.assign(new Error("The operation was aborted.", { cause: reason }), { name: "TimeoutError" });
    const error = new Error("the bridge run failed", { cause: aborted });

    // Act
    const message = messageOf(error);

    // Assert
    expect(message).toBe(expected);
  });

  it("does not repeat the RPC failure that the call which gave up on it quotes, and keeps what is under it", () => {
    // Arrange
    const rpc = "choria_provision#jwt";
    const lastTry = new RpcTransportError("n1.example.net", rpc, "the connection closed before the broker confirmed the request", { cause: refused() });
    const error = new RpcRetriesExhaustedError("n1.example.net", rpc, 5, lastTry);

    // Act
    const message = messageOf(error);

    // Assert
    expect(message).toBe(
      "choria_provision#jwt to n1.example.net failed: gave up after 5 tries: the connection closed before the broker confirmed the request: connect ECONNREFUSED 127.0.0.1:8000",
    );
  });

  it("says a non-Error value was thrown when it has nothing to say", () => {
    // Act
    const message = messageOf({ code: 7 });

    // Assert
    expect(message).toBe("a value that is not an Error was thrown");
  });

  it("stops at a cause that points back into the chain", () => {
    // Arrange
    const first = new Error("first");
    const second = new Error("second", { cause: first });
    (first as { cause?: unknown }).cause = second;

    // Act
    const message = messageOf(second);

    // Assert
    expect(message).toBe("second: first");
  });

  it("follows a log line's text with each link of the chain it does not already say", () => {
    // Arrange
    const error = new LeaseStoreError("the lease store for site local could not be reached", {
      cause: awsError("TimeoutError", "The operation was aborted due to timeout"),
    });

    // Act
    const line = withCauseChain(`Could not provision n1: ${error.message}`, error);

    // Assert
    expect(line).toBe("Could not provision n1: the lease store for site local could not be reached: TimeoutError: The operation was aborted due to timeout");
  });

  it("lists the causes by name and own message, with the same stops as the message", () => {
    // Arrange
    let parseError: unknown;
    try {
      JSON.parse("{");
    } catch (error) {
      parseError = error;
    }
    const denied = awsError("AccessDeniedException", "not authorized", { cause: parseError });
    const error = new HelperError("could not invoke configure helper", { cause: new LeaseStoreError("could not read", { cause: denied }) });

    // Act
    const causes = causesOf(error);

    // Assert
    expect(causes).toEqual([
      { name: "LeaseStoreError", message: "could not read" },
      { name: "AccessDeniedException", message: "not authorized" },
    ]);
  });

  it("gives the logged line the cause, with secret values masked", () => {
    // Arrange
    const lines: string[] = [];
    const logger = createConsoleLogger({ write: (line) => lines.push(line), secretValues: ["s3cret-password-value"] });
    const error = new LeaseStoreError("the lease store for site local could not be reached", {
      cause: awsError("UnrecognizedClientException", "The security token s3cret-password-value is invalid"),
    });

    // Act
    logger.error("paused: the lease store could not be reached", { error: messageOf(error) });

    // Assert
    const record = JSON.parse(lines[0] ?? "{}") as { error?: string };
    expect(record.error).toBe(
      "the lease store for site local could not be reached: UnrecognizedClientException: The security token [redacted] is invalid",
    );
  });

  it("gives a logged Error its cause chain as its message, without the causes' stacks", () => {
    // Arrange
    const lines: string[] = [];
    const logger = createConsoleLogger({ write: (line) => lines.push(line) });
    const error = new LeaseStoreError("the lease store for site local could not be reached", { cause: refused() });

    // Act
    logger.error("lease round failed", { error });

    // Assert
    const record = JSON.parse(lines[0] ?? "{}") as { error?: { name: string; message: string; cause?: unknown } };
    expect(record.error?.name).toBe("LeaseStoreError");
    expect(record.error?.message).toBe("the lease store for site local could not be reached: connect ECONNREFUSED 127.0.0.1:8000");
    expect(record.error?.cause).toBeUndefined();
  });
});
