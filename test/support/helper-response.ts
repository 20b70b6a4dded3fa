import type { HelperResponse } from "../../lib/ports/helper";

/** A helper response with the given fields and the Go zero value in every other one. */
export function helperResponseWith(fields: Partial<HelperResponse>): HelperResponse {
  return {
    defer: false,
    shutdown: false,
    msg: "",
    configuration: {},
    certificate: "",
    ca: "",
    key: "",
    ssldir: "",
    server_claims: null,
    action_policies: {},
    opa_policies: {},
    upgrade: "",
    ...fields,
  };
}
