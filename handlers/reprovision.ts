/** Operator: `{"identities": ["a.example.net", ...], "force": false}` -> admitted (source "operator") and queued under the current term; unknown and provisioned hosts refused unless `"force": true`. */
export { handler, makeHandler } from "../lib/aws/functions/reprovision";
