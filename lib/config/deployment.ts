/** The deployment id this stack holds the lease under: configured, or derived by serverless.yml through its environment. */
import { ConfigError } from "../errors";
import type { RawConfig } from "./schema";

/** Set by serverless.yml to `<stage>/<Region>/<account>`: the default `deployment_id` of a deployed stack. */
export const STACK_DEPLOYMENT_ID_ENV = "STACK_DEPLOYMENT_ID";

/**
 * Names this deployment in the lease. Two stacks of one site must never share it, or both hold the
 * lease as one holder: so never the Region alone. A stack deployed by serverless.yml gets
 * `<stage>/<Region>/<account>` (one stack per stage, Region and account) unless the file names one;
 * elsewhere, with leader election on, it must be configured.
 */
export function deploymentIdOf(raw: RawConfig, env: Record<string, string | undefined>): string {
  const id = raw.deployment_id ?? nonEmpty(env[STACK_DEPLOYMENT_ID_ENV]);
  if (id !== undefined) return id;
  if (raw.leader_election) {
    throw new ConfigError(
      "deployment_id",
      `is required when leader_election is on (a stack deployed with serverless.yml derives it from its stage, Region and account through ${STACK_DEPLOYMENT_ID_ENV})`,
    );
  }
  return "local";
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
