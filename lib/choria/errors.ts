import { InvalidInputError } from "../errors";

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
