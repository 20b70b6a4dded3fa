import * as z from "zod";

/**
 * The raw YAML document, validated for shape only. Every key is optional here; defaults, duration
 * parsing and rules that span keys are applied afterwards in `parseConfig`, so each failure can
 * name exactly one YAML key. Durations are strings (Go reads them as strings too).
 */
const text = z.string();
const flag = z.boolean();
const port = z.number().int().min(0).max(65535);

export const featuresSchema = z.object({
  pki: flag.optional(),
  jwt: flag.optional(),
  ed25519: flag.optional(),
  upgrades: flag.optional(),
});

export const tlsSchema = z.object({
  ca: text.optional(),
  cert: text.optional(),
  key: text.optional(),
  insecure_skip_verify: flag.optional(),
});

export const leaseSchema = z.object({
  duration: text.optional(),
  renew_interval: text.optional(),
  skew_bound: text.optional(),
  assume_synchronized_clocks: flag.optional(),
});

export const rawConfigSchema = z.object({
  workers: z.number().int().min(0).optional(),
  interval: text.optional(),
  logfile: text.optional(),
  loglevel: z.enum(["", "debug", "info", "warn", "error"]).optional(),
  helper: text.optional(),
  token: text.optional(),
  lifecycle_component: text.optional(),
  choria_insecure: flag.optional(),
  site: text.optional(),
  monitor_port: port.optional(),
  broker_port: port.optional(),
  broker_provisioning_password: text.optional(),
  cert_deny_list: z.array(text).optional(),
  jwt_verify_cert: text.optional(),
  jwt_signing_key: text.optional(),
  jwt_signing_token: text.optional(),
  server_jwt_validity: text.optional(),
  rego_policy: text.optional(),
  leader_election: flag.optional(),
  upgrades_repository: text.optional(),
  upgrades_optional: flag.optional(),
  features: featuresSchema.optional(),

  broker_urls: z.array(text).optional(),
  identity: text.optional(),
  callerid: text.optional(),
  protocol_version: z.union([z.literal(1), z.literal(2)]).optional(),
  client_jwt: text.optional(),
  client_seed: text.optional(),
  tls: tlsSchema.optional(),
  nats_token: text.optional(),
  deployment_id: text.optional(),
  lease: leaseSchema.optional(),
  helper_function: text.optional(),
  helper_timeout: text.optional(),
  rpc_ttl: z.number().int().min(30).optional(),
  discovery_timeout: text.optional(),
  discovery_max_nodes: z.number().int().min(1).optional(),
});

export type RawConfig = z.infer<typeof rawConfigSchema>;

/** Nested sections and their known keys, for the unknown-key warning. */
export const NESTED_SECTIONS: Record<string, readonly string[]> = {
  features: Object.keys(featuresSchema.shape),
  tls: Object.keys(tlsSchema.shape),
  lease: Object.keys(leaseSchema.shape),
};

export const TOP_LEVEL_KEYS: readonly string[] = Object.keys(rawConfigSchema.shape);

/** Top-level keys an environment variable `PROVISIONER_<KEY>` may set, with how to read the text. */
export const ENV_OVERRIDABLE: Record<string, "string" | "boolean" | "integer" | "list"> = {
  workers: "integer",
  interval: "string",
  logfile: "string",
  loglevel: "string",
  helper: "string",
  token: "string",
  lifecycle_component: "string",
  choria_insecure: "boolean",
  site: "string",
  monitor_port: "integer",
  broker_port: "integer",
  broker_provisioning_password: "string",
  jwt_verify_cert: "string",
  jwt_signing_key: "string",
  jwt_signing_token: "string",
  server_jwt_validity: "string",
  rego_policy: "string",
  leader_election: "boolean",
  upgrades_repository: "string",
  upgrades_optional: "boolean",
  broker_urls: "list",
  identity: "string",
  callerid: "string",
  protocol_version: "integer",
  client_jwt: "string",
  client_seed: "string",
  nats_token: "string",
  deployment_id: "string",
  helper_function: "string",
  helper_timeout: "string",
  rpc_ttl: "integer",
  discovery_timeout: "string",
  discovery_max_nodes: "integer",
};
