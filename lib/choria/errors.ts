import { InvalidInputError, RpcTransportError } from "../errors";

/** A Choria envelope failed to decode; `layer` names the onion layer that was wrong. */
export class EnvelopeError extends InvalidInputError {
  constructor(
    readonly layer: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`invalid ${layer}: ${message}`, options);
  }
}

/**
 * The attempt's send-by instant passed (or the attempt settled) before its request could be
 * published: nothing was sent. Here, beside the protocol, because the use cases tell it apart (an
 * unsent renewal is retried at once) and they may not import the NATS adapter that raises it.
 */
export class RpcNotSentError extends RpcTransportError {}
