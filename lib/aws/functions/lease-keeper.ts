/** `leaseKeeper` (EventBridge schedule, every minute): renews or contests the lease every renew_interval until just before the deadline. */
import type { FunctionParts } from "../compose";
import { DynamoDbSiteRegistries } from "../../dynamodb/site-registries";
import { SiteMemoryCheck } from "../../app/site-memory";
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import type { KeepLeaseResult } from "../../app/leadership";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface LeaseKeeperFunction {
  keepLease(ctx: InvocationContext): Promise<KeepLeaseResult>;
  close(): Promise<void>;
}

/** The function on its composed parts: its handler's (handlers/lease-keeper.ts) and the whole local stack's. */
export function leaseKeeperFunction({ parts, invocations, leadership }: BrokerFunctionParts): LeaseKeeperFunction {
  const siteMemory = siteMemoryCheck(parts);
  const keepLease: LeaseKeeperFunction["keepLease"] = (ctx) =>
    invocations.run(ctx, async () => {
      // Beside the lease round, not before it: the check never delays keeping the lease.
      const checked = siteMemory?.check();
      const result = await leadership.keepLease(ctx);
      await checked;
      return result;
    });
  return { keepLease, close: parts.close };
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

export function makeHandler(getFunction: () => Promise<LeaseKeeperFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.keepLease(context));
}
