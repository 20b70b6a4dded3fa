/** Operator: gives up this deployment's lease so a standby takes over without waiting for expiry. */
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app) => app.release());
}

export const handler = makeHandler(lazyApp("release"));
