/** EventBridge schedule (every minute): forwards startup lifecycle events from the broker to the lifecycle queue (docs/lifecycle.md). */
import { lifecycleEventSource } from "../lib/aws/compose-broker";
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { lifecycleBridgeFunction, makeHandler } from "../lib/aws/functions/lifecycle-bridge";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(
  lazyFunction(brokerFunction("lifecycleBridge", (composed) => lifecycleBridgeFunction(composed, lifecycleEventSource(composed.parts, composed.broker)))),
);
