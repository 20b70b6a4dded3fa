/** Operator: `{"identities": ["a.example.net", ...], "force": false}` -> admitted (source "operator") and queued under the current term; unknown and provisioned hosts refused unless `"force": true`. */
import { brokerFunction } from "../lib/aws/compose-broker-function";
import { reprovisionFunction, makeHandler } from "../lib/aws/functions/reprovision";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(brokerFunction("reprovision", reprovisionFunction)));
