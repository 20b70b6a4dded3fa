/** EventBridge schedule (every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, (app, _event: unknown, context) => app.discover(context));
}

export const handler = makeHandler(lazyApp("discover"));
