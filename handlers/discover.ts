/** EventBridge schedule (every interval): gate, broadcast discovery, admit and queue term-stamped host work. */
export { handler, makeHandler } from "../lib/aws/functions/discover";
