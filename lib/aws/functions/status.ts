/** `status` (sls invoke -f status): this deployment's role, lease holder and term, queue depths, registry counts and last errors, credential expiry and renewal (and whether renew runs go). */
import { status } from "../../app/operator/functions";
import type { FunctionParts } from "../compose";
import { DynamoDbRenewalStore } from "../../dynamodb/renewal-store";
import { RenewCalendar } from "../../config/renew-calendar";
import { wrapHandler } from "../middleware";
import type { StatusFunctionReport } from "../../app/operator/functions";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface StatusFunction {
  status(): Promise<StatusFunctionReport>;
  close(): Promise<void>;
}

/**
 * The function on its composed parts: its handler's (handlers/status.ts) and the whole local stack's.
 * Reads the lease, the queues and the registry: no broker, no engine, no key or TLS file, no secret.
 */
export function statusFunction(parts: FunctionParts): StatusFunction {
  const { config, settings } = parts;
  const renewalStore = new DynamoDbRenewalStore({ client: parts.storeClient, tableName: settings.admissionTable });
  const report = () =>
    status({
      site: config.site,
      deploymentId: config.deploymentId,
      leaderElection: config.leaderElection,
      ...(parts.leaseStore ? { leaseStore: parts.leaseStore } : {}),
      registry: parts.registry,
      renewalStore,
      renew: {
        before: config.renew.before,
        ratePerMinute: config.renew.ratePerMinute,
        maxInFlight: config.renew.maxInFlight,
        timeoutMs: config.renew.timeoutMs,
        calendar: new RenewCalendar(config.renew.windows, config.renew.freezes),
      },
      queues: parts.queues,
      clock: parts.clock,
      metrics: parts.metrics,
    });
  return { status: report, close: parts.close };
}

export function makeHandler(getFunction: () => Promise<StatusFunction>) {
  return wrapHandler(getFunction, (fn) => fn.status());
}
