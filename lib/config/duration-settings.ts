/** A duration setting read into milliseconds, the ConfigError naming its key when it is not a duration or not in range. */
import { ConfigError } from "../errors";
import { DurationError, parseDuration } from "./duration";

export function duration(key: string, text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    if (error instanceof DurationError) {
      throw new ConfigError(key, `${error.message} (a number with its unit, such as 30s, 5m, 1h30m or 7d)`, { cause: error });
    }
    throw error;
  }
}

export function positiveDuration(key: string, text: string): number {
  const ms = duration(key, text);
  if (ms <= 0) throw new ConfigError(key, `must be a positive duration, such as 30s or 5m; got "${text}"`);
  return ms;
}

export function nonNegativeDuration(key: string, text: string): number {
  const ms = duration(key, text);
  if (ms < 0) throw new ConfigError(key, `must not be negative; got "${text}"`);
  return ms;
}
