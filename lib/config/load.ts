import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { ConfigError } from "../errors";
import type { Logger } from "../ports/logger";
import { parseConfig } from "./config";
import type { ProvisionerConfig } from "./types";
import { ENV_OVERRIDABLE } from "./keys";
import { FUNCTION_SETTINGS, REFERENCE_SETTINGS, resolveReferences, type FunctionName, type SecretResolver } from "./secrets";

export interface LoadConfigOptions {
  /** YAML file path; defaults to `PROVISIONER_CONFIG`. */
  file?: string;
  /** Environment to read `PROVISIONER_CONFIG`, `PROVISIONER_CONFIG_YAML` and overrides from. */
  env?: Record<string, string | undefined>;
  /** Resolves `ssm:` / `secretsmanager:` references; without one, a reference is a ConfigError. */
  secrets?: SecretResolver;
  /**
   * The function being started: only the references it uses are resolved (FUNCTION_SETTINGS), so its
   * role needs read access to no other secret. Unset (local runs): every reference is resolved.
   */
  function?: FunctionName;
  logger?: Logger;
}

const ENV_PREFIX = "PROVISIONER_";

/**
 * Reads the configuration from a YAML file and/or inline YAML (`PROVISIONER_CONFIG_YAML`, for
 * Lambda), applies `PROVISIONER_<KEY>` overrides of top-level scalars, resolves secret references
 * and validates the result once. Inline YAML overrides the file key by key.
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<ProvisionerConfig> {
  const env = options.env ?? process.env;
  const file = options.file ?? nonEmpty(env.PROVISIONER_CONFIG);
  const inline = nonEmpty(env.PROVISIONER_CONFIG_YAML);

  const document: Record<string, unknown> = {};
  if (file) Object.assign(document, parseDocument(await readConfigFile(file), `file ${file}`));
  if (inline) Object.assign(document, parseDocument(inline, "PROVISIONER_CONFIG_YAML"));
  if (!file && !inline) {
    throw new ConfigError("(root)", "no configuration given: set PROVISIONER_CONFIG or PROVISIONER_CONFIG_YAML");
  }
  Object.assign(document, environmentOverrides(env));
  const settings = options.function ? FUNCTION_SETTINGS[options.function] : REFERENCE_SETTINGS;
  await resolveReferences(document, settings, options.secrets, (key, message, cause) => new ConfigError(key, message, { cause }));
  return parseConfig(document, { logger: options.logger, env });
}

async function readConfigFile(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    throw new ConfigError("(root)", `configuration file ${file} could not be read`, { cause: error });
  }
}

/** YAML 1.1, as the Go daemon's yaml.v2-based loader reads it (`yes`/`on` are booleans there too). */
function parseDocument(text: string, source: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = parseYaml(text, { version: "1.1" });
  } catch (error) {
    throw new ConfigError("(root)", `${source} is not valid YAML`, { cause: error });
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ConfigError("(root)", `${source} must be a YAML mapping`);
  }
  return parsed as Record<string, unknown>;
}

function environmentOverrides(env: Record<string, string | undefined>): Record<string, unknown> {
  const overrides: Record<string, unknown> = {};
  for (const [key, kind] of Object.entries(ENV_OVERRIDABLE)) {
    const name = `${ENV_PREFIX}${key.toUpperCase()}`;
    const text = env[name];
    if (text === undefined) continue;
    overrides[key] = readEnvValue(key, name, kind, text);
  }
  return overrides;
}

function readEnvValue(key: string, name: string, kind: string, text: string): unknown {
  switch (kind) {
    case "boolean":
      if (/^(true|1|yes|on)$/i.test(text)) return true;
      if (/^(false|0|no|off|)$/i.test(text)) return false;
      throw new ConfigError(key, `${name} must be true or false`);
    case "integer":
      if (!/^\d+$/.test(text.trim())) throw new ConfigError(key, `${name} must be a whole number`);
      return Number(text);
    case "list":
      return text.split(",").map((item) => item.trim()).filter((item) => item !== "");
    default:
      return text;
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
