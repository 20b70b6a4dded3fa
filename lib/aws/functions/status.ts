/** `status` (sls invoke -f status): this deployment's role, lease holder and term, queue depths, registry counts and last errors, credential expiry and renewal (and whether renew runs go). */
import { status } from "../../app/operator/functions";
import type { AppSettings } from "../settings";
import { composeParts, functionSettings, type AppOverrides, type FunctionParts } from "../compose";
import { DynamoDbRenewalStore } from "../../dynamodb/renewal-store";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import type { StatusFunctionReport } from "../../app/operator/functions";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface StatusFunction {
  status(): Promise<StatusFunctionReport>;
  close(): Promise<void>;
}

export function statusUseCase(parts: FunctionParts): StatusFunction["status"] {
  const { config, settings } = parts;
  const renewalStore = new DynamoDbRenewalStore({ client: parts.storeClient, tableName: settings.admissionTable });
  return () =>
    status({
      site: config.site,
      deploymentId: config.deploymentId,
      leaderElection: config.leaderElection,
      ...(parts.leaseStore ? { leaseStore: parts.leaseStore } : {}),
      registry: parts.registry,
      renewalStore,
      renew: { before: config.renew.before, ratePerMinute: config.renew.ratePerMinute, maxInFlight: config.renew.maxInFlight, timeoutMs: config.renew.timeoutMs },
      queues: parts.queues,
      clock: parts.clock,
      metrics: parts.metrics,
    });
}

/** Reads the lease, the queues and the registry: no broker, no engine, no key or TLS file, no secret. */
export async function composeStatus(settings: AppSettings, overrides: AppOverrides = {}): Promise<StatusFunction> {
  const parts = await composeParts(functionSettings(settings, "status"), overrides);
  return { status: statusUseCase(parts), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<StatusFunction>) {
  return wrapHandler(getFunction, (fn) => fn.status());
}

export const handler = makeHandler(lazyFunction(composeStatus));
