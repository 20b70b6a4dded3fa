/** Scheduled every minute: the leader renews hosts whose certificate or server JWT expires soon (docs/renewal.md). */
export { handler, makeHandler } from "../lib/aws/functions/renew";
