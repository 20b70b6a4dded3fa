/** EventBridge schedule (every minute): renews or contests the lease every renew_interval until just before the deadline. */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { leaseKeeperFunction, makeHandler } from "../lib/aws/functions/lease-keeper";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("leaseKeeper", leaseKeeperFunction)));
