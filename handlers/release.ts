/** Operator: gives up this deployment's lease so a standby takes over without waiting for expiry. */
import { lazyApp, type App } from "../lib/app";
import { wrapHandler } from "../lib/app/middleware";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app) => app.release());
}

export const handler = makeHandler(lazyApp("release"));
