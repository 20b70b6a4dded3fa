/** Operator (sls invoke -f status): lease holder and term, queue depths, registry counts and last errors. */
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app) => app.status());
}

export const handler = makeHandler(lazyApp("status"));
