/** `discover` (EventBridge schedule, every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import type { DiscoverResult } from "../../app/leadership";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface DiscoverFunction {
  discover(ctx: InvocationContext): Promise<DiscoverResult>;
  close(): Promise<void>;
}

/** The function on its composed parts: its handler's (handlers/discover.ts) and the whole local stack's. */
export function discoverFunction({ parts, invocations, leadership }: BrokerFunctionParts): DiscoverFunction {
  return { discover: (ctx) => invocations.run(ctx, () => leadership.discover(ctx)), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<DiscoverFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.discover(context));
}
