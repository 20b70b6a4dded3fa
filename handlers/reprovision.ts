/** Operator: `{"identities": ["a.example.net", ...]}` -> admitted (source "operator") and queued, bypassing the once-per-interval rule. */
export { handler, makeHandler } from "../lib/aws/functions/reprovision";
