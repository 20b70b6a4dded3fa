/** EventBridge schedule (every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { discoverFunction, makeHandler } from "../lib/aws/functions/discover";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("discover", discoverFunction)));
