/** `discover` (EventBridge schedule, every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
import type { AppSettings } from "../settings";
import type { AppOverrides } from "../compose";
import { composeBrokerFunction, type BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import type { DiscoverResult } from "../../app/leadership";
import type { InvocationContext } from "../../app/use-case-ports";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface DiscoverFunction {
  discover(ctx: InvocationContext): Promise<DiscoverResult>;
  close(): Promise<void>;
}

export function discoverUseCase({ invocations, leadership }: BrokerFunctionParts): DiscoverFunction["discover"] {
  return (ctx) => invocations.run(ctx, () => leadership.discover(ctx));
}

export async function composeDiscover(settings: AppSettings, overrides: AppOverrides = {}): Promise<DiscoverFunction> {
  const composed = await composeBrokerFunction(settings, "discover", overrides);
  return { discover: discoverUseCase(composed), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<DiscoverFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.discover(context));
}

export const handler = makeHandler(lazyFunction(composeDiscover));
