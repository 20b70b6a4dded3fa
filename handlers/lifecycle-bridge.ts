/** EventBridge schedule (every minute): forwards startup lifecycle events from the broker to the lifecycle queue (docs/lifecycle.md). */
export { handler, makeHandler } from "../lib/aws/functions/lifecycle-bridge";
