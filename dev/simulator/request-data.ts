/**
 * Decoding an action's `data` the way the Go server's `json.Unmarshal` into the action's request
 * struct does: unknown keys are ignored, `null` leaves a field unset, a wrongly typed value fails
 * with Go's message (the simulator answers statuscode 4 with it, like mcorpc.ParseRequestData).
 */

import { ProvisionerError } from "../../lib/errors";

type GoFieldType = "string" | "int" | "map";

export interface RequestShape {
  /** Go type name, e.g. `ConfigureRequest`, used in error texts. */
  struct: string;
  fields: Record<string, GoFieldType>;
}

export type ParsedData = Record<string, string | number | Record<string, string> | undefined>;

/** The request's data does not fit the action's shape; the reply names the field. */
export class RequestDataError extends ProvisionerError {}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "object") return "object";
  return typeof value;
}

function mismatch(value: unknown, where: string, goType: string): RequestDataError {
  // Go names the literal only when a number does not fit a numeric field.
  const kind = jsonKind(value);
  const shown = kind === "number" && goType === "int" ? `number ${String(value)}` : kind;
  return new RequestDataError(`json: cannot unmarshal ${shown} into ${where} of type ${goType}`);
}

/** `raw` is the request body's `data` member: undefined when absent (Go: nil RawMessage). */
export function parseRequestData(raw: unknown, shape: RequestShape): ParsedData {
  if (raw === undefined) throw new RequestDataError("unexpected end of JSON input");
  if (raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw mismatch(raw, "Go value", `provision.${shape.struct}`);
  }
  const data = raw as Record<string, unknown>;
  const parsed: ParsedData = {};
  for (const [name, type] of Object.entries(shape.fields)) {
    const value = data[name];
    if (value === undefined || value === null) continue;
    const where = `Go struct field ${shape.struct}.${name}`;
    if (type === "string") {
      if (typeof value !== "string") throw mismatch(value, where, "string");
      parsed[name] = value;
    } else if (type === "int") {
      if (typeof value !== "number" || !Number.isInteger(value)) throw mismatch(value, where, "int");
      parsed[name] = value;
    } else {
      if (typeof value !== "object" || Array.isArray(value)) throw mismatch(value, where, "map[string]string");
      const entries: Record<string, string> = {};
      for (const [key, entry] of Object.entries(value as Record<string, unknown>)) {
        if (entry === null) continue;
        if (typeof entry !== "string") throw mismatch(entry, where, "string");
        entries[key] = entry;
      }
      parsed[name] = entries;
    }
  }
  return parsed;
}

export const REQUEST_SHAPES: Record<string, RequestShape> = {
  jwt: { struct: "JWTRequest", fields: { token: "string" } },
  gen25519: { struct: "ED25519Request", fields: { token: "string", nonce: "string" } },
  gencsr: {
    struct: "CSRRequest",
    fields: { token: "string", cn: "string", C: "string", L: "string", O: "string", OU: "string", ST: "string" },
  },
  configure: {
    struct: "ConfigureRequest",
    fields: {
      token: "string",
      config: "string",
      key: "string",
      certificate: "string",
      ca: "string",
      ssldir: "string",
      ecdh_public: "string",
      server_jwt: "string",
      action_policies: "map",
      opa_policies: "map",
    },
  },
  restart: { struct: "RestartRequest", fields: { token: "string", splay: "int" } },
  shutdown: { struct: "ShutdownRequest", fields: { token: "string" } },
  reprovision: { struct: "ReprovisionRequest", fields: { token: "string" } },
  release_update: { struct: "ReleaseUpdateRequest", fields: { token: "string", repository: "string", version: "string" } },
};
