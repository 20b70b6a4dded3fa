import * as z from "zod";
import { HelperError } from "../errors";
import type { HelperRequest, HelperResponse, ServerClaimsOverride } from "../ports/helper";

/** Largest helper output accepted; anything bigger is a HelperError rather than a memory spike. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

/** Encodes the host JSON with keys in the Go daemon's order. */
export function encodeHelperRequest(request: HelperRequest): Uint8Array {
  const ordered = {
    identity: request.identity,
    csr: request.csr,
    ed25519_pubkey: request.ed25519_pubkey,
    inventory: request.inventory,
    jwt: request.jwt,
  };
  return new TextEncoder().encode(JSON.stringify(ordered));
}

// Go decodes into a struct: a missing key or JSON null leaves the zero value, a wrong type fails.
const flag = z.boolean().nullish();
const text = z.string().nullish();
const stringMap = z.record(z.string(), z.string().nullable()).nullish();
const stringList = z.array(z.string()).nullish();

const serverClaimsSchema = z
  .object({
    ou: text,
    exp: z.number().nullish(),
    collectives: stringList,
    pub_subjects: stringList,
    permissions: z
      .object({ submission: flag, streams: flag, governor: flag, service_host: flag })
      .nullish(),
  })
  .nullish();

const responseSchema = z
  .object({
    defer: flag,
    shutdown: flag,
    msg: text,
    configuration: stringMap,
    certificate: text,
    ca: text,
    key: text,
    ssldir: text,
    server_claims: serverClaimsSchema,
    action_policies: stringMap,
    opa_policies: stringMap,
    upgrade: text,
  })
  .nullable();

/**
 * Decodes and validates helper output. Error messages name the offending field but never quote
 * the output, which may carry private keys.
 */
export function decodeHelperResponse(output: Uint8Array, helperName: string): HelperResponse {
  if (output.byteLength === 0) throw new HelperError(`cannot read ${helperName} output: zero bytes received`);

  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(output));
  } catch (error) {
    throw new HelperError(`cannot decode output from ${helperName}: not valid JSON (${output.byteLength} bytes)`, {
      cause: error instanceof Error ? new Error(error.name) : undefined,
    });
  }

  const result = responseSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue?.path.map(String).join(".") || "(root)";
    throw new HelperError(`cannot decode output from ${helperName}: field "${field}": ${issue?.message ?? "invalid"}`);
  }

  // A JSON `null` document decodes to all zero values in Go; the empty configuration then fails later.
  const body = result.data ?? {};
  return {
    defer: body.defer ?? false,
    shutdown: body.shutdown ?? false,
    msg: body.msg ?? "",
    configuration: cleanMap(body.configuration),
    certificate: body.certificate ?? "",
    ca: body.ca ?? "",
    key: body.key ?? "",
    ssldir: body.ssldir ?? "",
    server_claims: cleanClaims(body.server_claims),
    action_policies: cleanMap(body.action_policies),
    opa_policies: cleanMap(body.opa_policies),
    upgrade: body.upgrade ?? "",
  };
}

function cleanMap(map: Record<string, string | null> | null | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(map ?? {})) result[key] = value ?? "";
  return result;
}

function cleanClaims(claims: z.infer<typeof serverClaimsSchema>): ServerClaimsOverride | null {
  if (!claims) return null;
  const result: ServerClaimsOverride = {};
  if (claims.ou != null) result.ou = claims.ou;
  if (claims.exp != null) result.exp = claims.exp;
  if (claims.collectives != null) result.collectives = claims.collectives;
  if (claims.pub_subjects != null) result.pub_subjects = claims.pub_subjects;
  if (claims.permissions != null) {
    const permissions: NonNullable<ServerClaimsOverride["permissions"]> = {};
    for (const name of ["submission", "streams", "governor", "service_host"] as const) {
      const value = claims.permissions[name];
      if (value != null) permissions[name] = value;
    }
    result.permissions = permissions;
  }
  return result;
}
