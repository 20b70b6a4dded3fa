/**
 * The provisioning engine, only for `provision` (and the whole local stack): the JWT keys and the
 * token it hands nodes, the helper runner (a process or a Lambda function), and the gate it reads
 * before every RPC attempt and helper run.
 */
import { loadEngineKeys } from "./choria-client";
import { ProvisionEngine } from "../engine/provision";
import type { EngineSettings } from "../engine/settings";
import type { ChoriaRpc } from "../ports/rpc";
import type { FunctionParts } from "./compose";
import { createHelperRunner } from "./helper-runner";

/**
 * `provisions` false: an engine without the token and keys, for a whole-stack composition of a
 * function that does not provision (its configuration left those settings unresolved).
 */
export async function composeEngine(parts: FunctionParts, rpc: ChoriaRpc, provisions: boolean): Promise<ProvisionEngine> {
  const { config, overrides } = parts;
  const settings: EngineSettings = {
    features: config.features,
    token: provisions ? (config.token ?? "") : "",
    certDenyList: config.certDenyList,
    serverJwtValidityMs: config.serverJwtValidityMs,
    upgradesRepository: config.upgradesRepository ?? "",
    upgradesOptional: config.upgradesOptional,
    intervalMs: config.intervalMs,
    helperTimeoutMs: config.helperTimeoutMs,
    ...(provisions ? await loadEngineKeys(config) : {}),
  };
  return new ProvisionEngine({
    settings,
    rpc,
    gate: parts.gate,
    helper: overrides.helper ?? createHelperRunner(config),
    metrics: parts.metrics,
    clock: parts.clock,
    logger: parts.logger,
    ...(overrides.random ? { random: overrides.random } : {}),
  });
}
