/** Operator: gives up this deployment's lease so a standby takes over without waiting for expiry. */
export { handler, makeHandler } from "../lib/aws/functions/release";
