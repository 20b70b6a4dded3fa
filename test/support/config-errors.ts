import { ConfigError } from "../../lib/errors";

/** The ConfigError `action` throws; anything else it throws, or no throw at all, fails the test. */
export function configErrorOf(action: () => unknown): ConfigError {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}
