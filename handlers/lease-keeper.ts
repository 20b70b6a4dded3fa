/** EventBridge schedule (every minute): renews or contests the lease every renew_interval until just before the deadline. */
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app, _event: unknown, context) => app.keepLease(context));
}

export const handler = makeHandler(lazyApp("leaseKeeper"));
