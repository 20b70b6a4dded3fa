/** EventBridge schedule (every minute): forwards startup lifecycle events from the broker to the lifecycle queue (docs/lifecycle.md). */
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app, _event: unknown, context) => app.bridgeLifecycle(context));
}

export const handler = makeHandler(lazyApp("lifecycleBridge"));
