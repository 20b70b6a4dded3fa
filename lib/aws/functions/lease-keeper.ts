/** `leaseKeeper` (EventBridge schedule, every minute): keeps or contests the lease every lease.renew_interval until just before the deadline. */
import type { AppSettings } from "../settings";
import type { AppOverrides, FunctionParts } from "../compose";
import { DynamoDbSiteRegistries } from "../../dynamodb/site-registries";
import { SiteMemoryCheck } from "../../app/site-memory";
import { composeBrokerFunction, type BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import type { KeepLeaseResult } from "../../app/leadership";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface LeaseKeeperFunction {
  keepLease(ctx: InvocationContext): Promise<KeepLeaseResult>;
  close(): Promise<void>;
}

export function keepLeaseUseCase({ parts, invocations, leadership }: BrokerFunctionParts): LeaseKeeperFunction["keepLease"] {
  const siteMemory = siteMemoryCheck(parts);
  return (ctx) =>
    invocations.run(ctx, async () => {
      // Beside the lease round, not before it: the check never delays keeping the lease.
      const checked = siteMemory?.check();
      const result = await leadership.keepLease(ctx);
      await checked;
      return result;
    });
}

/** With a site lease (leader election on), the check that every deployment of the site uses this one's registry. */
function siteMemoryCheck(parts: FunctionParts): SiteMemoryCheck | undefined {
  const { settings, config } = parts;
  if (!config.leaderElection || !settings.leaseTable) return undefined;
  const registries = new DynamoDbSiteRegistries({
    site: config.site,
    admission: { client: parts.storeClient, tableName: settings.admissionTable },
    lease: { client: parts.leaseClient, tableName: settings.leaseTable },
  });
  return new SiteMemoryCheck({ deploymentId: config.deploymentId, registries, clock: parts.clock, logger: parts.logger, metrics: parts.metrics });
}

export async function composeLeaseKeeper(settings: AppSettings, overrides: AppOverrides = {}): Promise<LeaseKeeperFunction> {
  const composed = await composeBrokerFunction(settings, "leaseKeeper", overrides);
  return { keepLease: keepLeaseUseCase(composed), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<LeaseKeeperFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.keepLease(context));
}

export const handler = makeHandler(lazyFunction(composeLeaseKeeper));
