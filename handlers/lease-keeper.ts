/** EventBridge schedule (every minute): keeps or contests the lease every lease.renew_interval until just before the deadline. */
export { handler, makeHandler } from "../lib/aws/functions/lease-keeper";
