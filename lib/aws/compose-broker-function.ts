/** A function that reaches the broker, composed from its settings: what the broker functions' handlers (handlers/*.ts) run. */
import type { FunctionName } from "../config/secrets";
import type { ChoriaBroker } from "../nats/broker";
import { composeParts, functionSettings, type AppOverrides } from "./compose";
import { composeBroker, withBroker, type BrokerFunctionParts } from "./compose-broker";
import { createPowertoolsSecretResolver } from "./powertools-secrets";
import type { AppSettings } from "./settings";

/**
 * Function `fn`: its parts (only its own secrets resolved), the broker, and admission, leadership
 * and the invocation wrapper on it (it may win a term, so it announces one), then `on` them.
 */
export function brokerFunction<T>(fn: FunctionName, on: (composed: BrokerFunctionParts & { broker: ChoriaBroker }) => T | Promise<T>): (settings: AppSettings, overrides: AppOverrides) => Promise<T> {
  return async (settings, overrides) => {
    const parts = await composeParts(functionSettings(settings, fn), overrides, createPowertoolsSecretResolver);
    return on(withBroker(parts, await composeBroker(parts)));
  };
}
