/** The raw YAML document before it is validated: its nulls dropped, and the warnings about unknown, ignored and risky keys. */
import type { Logger } from "../ports/logger";
import { nearestKey } from "./did-you-mean";
import { SETTINGS } from "./keys";
import { NESTED_SECTIONS, TOP_LEVEL_KEYS } from "./schema";

/** The message of the one warning per unknown key (deploy-check tells it apart from others). */
export const UNKNOWN_KEY_WARNING = "ignoring unknown configuration key";

/** Every key a document may set, dotted for nested ones, and the sections themselves: what an unknown key is compared with. */
const KNOWN_KEYS: readonly string[] = [...new Set([...TOP_LEVEL_KEYS, ...SETTINGS.map(([name]) => name)])];

export function warnUnknownKeys(document: Record<string, unknown>, logger: Logger | undefined): void {
  if (!logger) return;
  // Not `key`: an attribute of that name is masked as a credential.
  const warn = (setting: string) => {
    const didYouMean = nearestKey(setting, KNOWN_KEYS);
    logger.warn(UNKNOWN_KEY_WARNING, didYouMean === undefined ? { setting } : { setting, didYouMean });
  };
  for (const key of Object.keys(document)) {
    if (!TOP_LEVEL_KEYS.includes(key)) {
      warn(key);
      continue;
    }
    const nestedKeys = NESTED_SECTIONS[key];
    const section = document[key];
    if (nestedKeys && isPlainObject(section)) {
      for (const nested of Object.keys(section)) {
        if (!nestedKeys.includes(nested)) warn(`${key}.${nested}`);
      }
    }
  }
}

/** Keys a Go configuration sets that have no effect here: said, so no one thinks they do. */
export function warnIgnoredKeys(document: Record<string, unknown>, logger: Logger | undefined): void {
  if (!logger) return;
  for (const [key, spec] of SETTINGS) {
    const value = document[key];
    if (spec.ignored && value !== undefined && value !== "" && value !== 0) {
      logger.warn("configuration key has no effect in the serverless provisioner", { setting: key, detail: spec.ignored });
    }
  }
}

/** Settings that are valid but weaken the deployment: accepted, and said. */
export function warnRiskySettings(document: Record<string, unknown>, logger: Logger | undefined): void {
  if (!logger) return;
  const tls = document.tls;
  if (isPlainObject(tls) && tls.insecure_skip_verify === true && document.choria_insecure !== true) {
    logger.warn("the broker's TLS certificate is not verified", {
      setting: "tls.insecure_skip_verify",
      detail: "anyone on the network path can pose as the broker and receive the provisioning requests, tokens and keys; give tls.ca instead",
    });
  }
}

/** YAML `key:` with no value is null; Go leaves the field at its zero value, so drop it. */
export function dropNulls(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  const result: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(value)) {
    if (entry !== null) result[key] = dropNulls(entry);
  }
  return result;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
