/** `leaseKeeper` (EventBridge schedule, every minute): renews or contests the lease every renew_interval until just before the deadline. */
import type { AppSettings } from "../settings";
import type { AppOverrides } from "../compose";
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

export function keepLeaseUseCase({ invocations, leadership }: BrokerFunctionParts): LeaseKeeperFunction["keepLease"] {
  return (ctx) => invocations.run(ctx, () => leadership.keepLease(ctx));
}

export async function composeLeaseKeeper(settings: AppSettings, overrides: AppOverrides = {}): Promise<LeaseKeeperFunction> {
  const composed = await composeBrokerFunction(settings, "leaseKeeper", overrides);
  return { keepLease: keepLeaseUseCase(composed), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<LeaseKeeperFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.keepLease(context));
}

export const handler = makeHandler(lazyFunction(composeLeaseKeeper));
