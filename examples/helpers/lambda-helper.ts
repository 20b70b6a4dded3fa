/**
 * Example helper as a Lambda function, for `helper_function: <this function's name or ARN>`.
 *
 * The provisioner invokes it synchronously with the host JSON as the event
 * (`{identity, csr, ed25519_pubkey, inventory, jwt}`) and reads the returned object as the helper
 * response. Return the object itself, not a JSON string; throwing makes the invocation a
 * FunctionError, which the provisioner counts as a helper error. The decisions (defer-/shutdown-
 * identity conventions, PROVISION_HELPER_* variables) are shared with provision-helper.mjs.
 */
import { decide, type HelperInput, type HelperOutput } from "./decide.mjs";

export const handler = async (event: HelperInput): Promise<HelperOutput> => decide(event, process.env);
