/** EventBridge schedule (every minute): renews or contests the lease every renew_interval until just before the deadline. */
export { handler, makeHandler } from "../lib/aws/functions/lease-keeper";
