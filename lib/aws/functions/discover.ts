/** `discover` (EventBridge schedule, every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
import type { AppSettings } from "../../app/settings";
import type { AppOverrides } from "../compose";
import { composeBrokerFunction, type BrokerFunctionParts } from "../compose-broker";
import type { App } from "../create-app";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";

export type DiscoverFunction = Pick<App, "discover" | "close">;

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
