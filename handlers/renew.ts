/** Scheduled every minute: the leader renews hosts whose certificate or server JWT expires soon (docs/renewal.md). */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { renewFunction, makeHandler } from "../lib/aws/functions/renew";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("renew", renewFunction)));
