/** The steps after the helper that act on the node: shut it down, upgrade it, or configure and restart it. */
import { compareVersions } from "../crypto/version";
import { HelperError, messageOf, PausedError, RpcTimeoutError } from "../errors";
import { METRIC } from "../ports/metric-names";
import type { HelperResponse } from "../ports/helper";
import type { TransportedKey } from "./credentials";
import { OutOfTimeError, RpcRetriesExhaustedError, UpgradeError } from "./errors";
import { encodeGoJson } from "./go-json";
import { callPlanned, type HostRun } from "./host-run";
import type { Csr, NodeInventory } from "./node-facts";
import { RESTART_SPLAY_SECONDS } from "./plan";

/** True when the node acknowledged the shutdown, false when it answered with an error status. */
export async function shutdown(run: HostRun, reason: string): Promise<boolean> {
  run.logger.warn(reason === "" ? "Shutting down host based on helper output, no reason given" : "Shutting down host based on helper output", {
    ...run.log,
    reason: reason === "" ? undefined : reason,
  });
  const acknowledged = await callPlanned(
    run,
    "shutdown",
    () => ({ token: run.settings.token }),
    () => true,
    // Go only logs an error status from shutdown; the call is done either way.
    (status) => {
      run.logger.warn(`Could not shutdown ${status.sender}: ${status.statusmsg} (${status.statuscode})`, run.log);
      return false;
    },
  );
  if (acknowledged) run.deps.metrics.count(METRIC.helperShutdownRequests);
  return acknowledged;
}

/** True when release_update was accepted (stop without configuring); false to carry on. */
export async function upgrade(run: HostRun, inventory: NodeInventory, target: string): Promise<boolean> {
  try {
    return await releaseUpdate(run, inventory, target);
  } catch (error) {
    // A closed gate or the invocation deadline stops the sequence even when upgrades are optional.
    if (error instanceof PausedError || error instanceof OutOfTimeError || !run.settings.upgradesOptional) throw error;
    run.logger.warn(`Could not upgrade to ${target}, continuing: ${messageOf(error)}`, run.log);
    return false;
  }
}

async function releaseUpdate(run: HostRun, { version, upgradable }: NodeInventory, target: string): Promise<boolean> {
  const { upgradesRepository, upgradesOptional } = run.settings;
  if (upgradesRepository === "" && !upgradesOptional) {
    throw new UpgradeError("upgrades_repository not configured for upgrades feature");
  }
  if (version === "") throw new UpgradeError("did not receive a version in inventory");
  if (!upgradable) throw new UpgradeError("does not support upgrades");
  if (compareVersions(version, target) === 0) return false;

  run.logger.warn(`Will attempt version update from ${version} to ${target}`, run.log);
  try {
    await callPlanned(
      run,
      "releaseUpdate",
      () => ({ repository: upgradesRepository, token: run.settings.token, version: target }),
      () => undefined,
    );
  } catch (error) {
    if (error instanceof PausedError || error instanceof OutOfTimeError) throw error;
    throw new UpgradeError(`update to ${target} failed: ${messageOf(error)}`, { cause: error });
  }
  return true;
}

export async function configure(run: HostRun, response: HelperResponse, csr: Csr | null, serverJwt: string, key: TransportedKey): Promise<void> {
  const ssldir = csr !== null && csr.ssldir !== "" ? csr.ssldir : response.ssldir;
  await callPlanned(
    run,
    "configure",
    () => {
      // Checked per attempt, as Go does inside the retry loop: each try fails without sending.
      if (Object.keys(response.configuration).length === 0) throw new HelperError("empty configuration");
      run.logger.info("Configuring node", run.log);
      return {
        action_policies: { ...response.action_policies },
        ca: response.ca,
        certificate: response.certificate,
        config: encodeGoJson(response.configuration),
        ecdh_public: key.ecdhPublic,
        key: key.encrypted,
        opa_policies: { ...response.opa_policies },
        server_jwt: serverJwt,
        ssldir,
        token: run.settings.token,
      };
    },
    () => undefined,
  );
}

/**
 * Restarts the node on its new configuration. When no restart attempt got a reply, the last one
 * timing out, the node is taken as restarted: it answers before it restarts, so once a reply is
 * lost the retries talk to a node that has left the provisioning broker. Counted as a failure, its
 * new credentials would be unknown to the registry and renewal would let them expire in service.
 * A node that did not restart is still in provisioning mode, and discovery provisions it again.
 */
export async function restartConfigured(run: HostRun): Promise<void> {
  try {
    await restart(run);
  } catch (error) {
    if (!(error instanceof RpcRetriesExhaustedError && error.cause instanceof RpcTimeoutError)) throw error;
    run.logger.warn("no restart attempt was answered after the node took its configuration; taking it as restarted", { ...run.log, error: messageOf(error) });
  }
}

async function restart(run: HostRun): Promise<void> {
  run.logger.info("Restarting node", run.log);
  await callPlanned(run, "restart", () => ({ splay: RESTART_SPLAY_SECONDS, token: run.settings.token }), () => undefined);
}
