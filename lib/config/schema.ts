import * as z from "zod";
import { CONFIG_KEYS } from "./keys";

type Table = typeof CONFIG_KEYS;
type TableShape = { -readonly [K in keyof Table]: Table[K]["schema"] };

/**
 * The YAML document, validated for shape and given its defaults (lib/config/keys.ts, the one
 * definition per key). Durations stay strings here (Go reads them as strings too); rules that span
 * keys are applied afterwards in `parseConfig`, so each failure can name exactly one YAML key.
 */
export const rawConfigSchema = z.object(
  Object.fromEntries(Object.entries(CONFIG_KEYS).map(([name, spec]) => [name, spec.schema])) as TableShape,
);

export type RawConfig = z.infer<typeof rawConfigSchema>;

/** Nested sections and their known keys, for the unknown-key warning. */
export const NESTED_SECTIONS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(CONFIG_KEYS).flatMap(([name, spec]) => ("section" in spec ? [[name, Object.keys(spec.section)]] : [])),
);

export const TOP_LEVEL_KEYS: readonly string[] = Object.keys(CONFIG_KEYS);
