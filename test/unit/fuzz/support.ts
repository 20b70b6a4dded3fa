import fc from "fast-check";
import { expect } from "vitest";

/** Bounded so the whole fuzz suite stays within seconds; the seed makes every failure replayable. */
export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 300);
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20_261_129);

type ErrorClass = abstract new (...args: never[]) => Error;

/**
 * Runs `decode`; a throw must be one of `allowed` (checked with instanceof, so subclasses pass).
 * Returns the decoded value, or undefined when it threw an allowed error.
 */
export function expectOnly<T>(decode: () => T, allowed: readonly ErrorClass[]): T | undefined {
  try {
    return decode();
  } catch (error) {
    const named = allowed.some((kind) => error instanceof kind);
    if (!named) expect.fail(`expected only ${allowed.map((kind) => kind.name).join("/")}, got ${error instanceof Error ? `${error.name}: ${error.stack}` : String(error)}`);
    return undefined;
  }
}

export async function expectOnlyAsync<T>(decode: () => Promise<T>, allowed: readonly ErrorClass[]): Promise<T | undefined> {
  try {
    return await decode();
  } catch (error) {
    const named = allowed.some((kind) => error instanceof kind);
    if (!named) expect.fail(`expected only ${allowed.map((kind) => kind.name).join("/")}, got ${error instanceof Error ? `${error.name}: ${error.stack}` : String(error)}`);
    return undefined;
  }
}

/** Byte-level damage a link or a hostile peer could do to a well-formed message. */
export function mutatedBytes(original: Uint8Array): fc.Arbitrary<Uint8Array> {
  const length = original.byteLength;
  const position = fc.nat({ max: Math.max(0, length - 1) });
  return fc.oneof(
    position.map((end) => original.slice(0, end)),
    fc.tuple(position, fc.integer({ min: 1, max: 255 })).map(([at, xor]) => {
      const copy = original.slice();
      copy[at] = (copy[at] ?? 0) ^ xor;
      return copy;
    }),
    fc.tuple(position, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([at, bytes]) => Buffer.concat([original.subarray(0, at), bytes, original.subarray(at)])),
    fc.tuple(position, fc.nat({ max: 16 })).map(([at, count]) => Buffer.concat([original.subarray(0, at), original.subarray(at + count)])),
    fc.constant(Buffer.concat([original, original])),
  );
}

/** Character-level damage to text (tokens, PEM blocks). */
export function mutatedText(original: string): fc.Arbitrary<string> {
  const position = fc.nat({ max: Math.max(0, original.length - 1) });
  const replacement = fc.oneof(fc.constantFrom(".", "=", "-", "_", "A", "/", "+", " ", "\n", "\u0000", "é"), fc.string({ minLength: 1, maxLength: 4 }));
  return fc.oneof(
    position.map((end) => original.slice(0, end)),
    fc.tuple(position, replacement).map(([at, text]) => original.slice(0, at) + text + original.slice(at + 1)),
    fc.tuple(position, replacement).map(([at, text]) => original.slice(0, at) + text + original.slice(at)),
    fc.tuple(position, fc.nat({ max: 12 })).map(([at, count]) => original.slice(0, at) + original.slice(at + count)),
  );
}
