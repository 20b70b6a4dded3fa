/**
 * Choria lifecycle events (docs/protocol.md §8): the Choria JSON format and its CloudEvents 1.0
 * wrapping. Servers publish CloudEvents by default; the Go provisioner publishes its own startup
 * event in Choria format. Parsing accepts both plus the legacy `choria:lifecycle:<type>:1` ids.
 */
import { randomUUID } from "node:crypto";
import { InvalidInputError } from "../errors";
import { identityProblem } from "./identity";
import { DEFAULT_MAX_MESSAGE_BYTES } from "./protocol";

const LIFECYCLE_TYPES = ["startup", "shutdown", "provisioned", "alive", "upgraded", "governor"] as const;
export type LifecycleType = (typeof LIFECYCLE_TYPES)[number];
export type LifecycleFormat = "choria" | "cloudevents";

const PROTOCOL_PREFIX = "io.choria.lifecycle.v1.";
const CLOUDEVENTS_SOURCE = "io.choria.lifecycle";
const LEGACY_PROTOCOL = /^choria:lifecycle:([a-z]+):1$/;

/** Only these event types carry `version` (upgraded adds `new_version`). */
const VERSIONED: ReadonlySet<LifecycleType> = new Set(["startup", "alive", "upgraded"]);

interface GovernorDetails {
  governor: string;
  sequence: number;
  eventType: string;
}

export interface LifecycleEvent {
  type: LifecycleType;
  /** UUIDv4 with dashes. */
  id: string;
  identity: string;
  component: string;
  /** Unix seconds, as on the wire. */
  timestamp: number;
  version?: string;
  newVersion?: string;
  governor?: GovernorDetails;
}

export interface LifecycleEventInput {
  type: LifecycleType;
  identity: string;
  component: string;
  version?: string;
  newVersion?: string;
  governor?: GovernorDetails;
  timestampMs: number;
  id?: string;
}

export function lifecycleSubject(type: LifecycleType, component: string): string {
  return `choria.lifecycle.event.${type}.${component}`;
}

function lifecycleProtocol(type: LifecycleType): string {
  return `${PROTOCOL_PREFIX}${type}`;
}

export function buildLifecycleEvent(input: LifecycleEventInput): LifecycleEvent {
  const event: LifecycleEvent = {
    type: input.type,
    id: input.id ?? randomUUID(),
    identity: input.identity,
    component: input.component,
    timestamp: Math.trunc(input.timestampMs / 1000),
  };
  if (VERSIONED.has(input.type)) event.version = input.version ?? "";
  if (input.type === "upgraded") event.newVersion = input.newVersion ?? "";
  if (input.type === "governor" && input.governor) event.governor = { ...input.governor };
  return event;
}

/** The Choria-format object, keys in Go's declaration order. */
function choriaObject(event: LifecycleEvent): Record<string, unknown> {
  const object: Record<string, unknown> = {
    protocol: lifecycleProtocol(event.type),
    id: event.id,
    identity: event.identity,
    component: event.component,
    timestamp: event.timestamp,
  };
  if (VERSIONED.has(event.type)) object.version = event.version ?? "";
  if (event.type === "upgraded") object.new_version = event.newVersion ?? "";
  if (event.type === "governor" && event.governor) {
    object.governor = event.governor.governor;
    object.sequence = event.governor.sequence;
    object.event_type = event.governor.eventType;
  }
  return object;
}

/** RFC 3339 in UTC without fractional seconds, as the go-choria tests render it. */
function rfc3339Seconds(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function encodeLifecycleEvent(event: LifecycleEvent, format: LifecycleFormat): Uint8Array {
  const data = choriaObject(event);
  if (format === "choria") return new TextEncoder().encode(JSON.stringify(data));
  return new TextEncoder().encode(
    JSON.stringify({
      specversion: "1.0",
      id: event.id,
      source: CLOUDEVENTS_SOURCE,
      type: lifecycleProtocol(event.type),
      subject: event.identity,
      datacontenttype: "application/json",
      time: rfc3339Seconds(event.timestamp),
      data,
    }),
  );
}

type JsonObject = Record<string, unknown>;

function invalid(field: string, problem: string): InvalidInputError {
  return new InvalidInputError(`invalid lifecycle event: "${field}" ${problem}`);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requireText(object: JsonObject, key: string, field = key): string {
  const value = object[key];
  if (typeof value !== "string") throw invalid(field, "must be a string");
  if (value.length === 0) throw invalid(field, "must not be empty");
  return value;
}

function optionalText(object: JsonObject, key: string, field = key): string | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw invalid(field, "must be a string");
  return value;
}

function typeFromProtocol(protocol: string, field: string): LifecycleType {
  const name = protocol.startsWith(PROTOCOL_PREFIX)
    ? protocol.slice(PROTOCOL_PREFIX.length)
    : LEGACY_PROTOCOL.exec(protocol)?.[1];
  const type = LIFECYCLE_TYPES.find((known) => known === name);
  if (!type) throw invalid(field, `names an unknown lifecycle event type: ${JSON.stringify(protocol.slice(0, 100))}`);
  return type;
}

function parseChoriaObject(object: JsonObject, prefix: string): LifecycleEvent {
  const type = typeFromProtocol(requireText(object, "protocol", `${prefix}protocol`), `${prefix}protocol`);
  const identity = requireText(object, "identity", `${prefix}identity`);
  const identityIssue = identityProblem(identity);
  if (identityIssue) throw invalid(`${prefix}identity`, identityIssue);
  const timestamp = object.timestamp;
  if (typeof timestamp !== "number" || !Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw invalid(`${prefix}timestamp`, "must be a non-negative integer of Unix seconds");
  }
  const event: LifecycleEvent = {
    type,
    id: requireText(object, "id", `${prefix}id`),
    identity,
    component: requireText(object, "component", `${prefix}component`),
    timestamp,
  };
  const version = optionalText(object, "version", `${prefix}version`);
  if (version !== undefined) event.version = version;
  const newVersion = optionalText(object, "new_version", `${prefix}new_version`);
  if (newVersion !== undefined) event.newVersion = newVersion;
  if (type === "governor") {
    const sequence = object.sequence;
    if (typeof sequence !== "number" || !Number.isSafeInteger(sequence) || sequence < 0) {
      throw invalid(`${prefix}sequence`, "must be a non-negative integer");
    }
    event.governor = {
      governor: requireText(object, "governor", `${prefix}governor`),
      sequence,
      eventType: requireText(object, "event_type", `${prefix}event_type`),
    };
  }
  return event;
}

/**
 * Decodes either format. Throws InvalidInputError naming the offending field (nested CloudEvents
 * fields as `data.<field>`); field values are never echoed except the unknown type name.
 */
export function parseLifecycleEvent(bytes: Uint8Array, maxBytes = DEFAULT_MAX_MESSAGE_BYTES): LifecycleEvent {
  if (bytes.byteLength > maxBytes) {
    throw new InvalidInputError(`invalid lifecycle event: ${bytes.byteLength} bytes exceed the ${maxBytes} byte limit`);
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch (error) {
    throw new InvalidInputError("invalid lifecycle event: not JSON", { cause: error });
  }
  if (!isObject(value)) throw new InvalidInputError("invalid lifecycle event: not a JSON object");

  if (value.specversion === undefined) return parseChoriaObject(value, "");

  if (value.specversion !== "1.0") throw invalid("specversion", `must be "1.0"`);
  if (value.source !== CLOUDEVENTS_SOURCE) throw invalid("source", `must be "${CLOUDEVENTS_SOURCE}"`);
  const ceType = typeFromProtocol(requireText(value, "type"), "type");
  const ceId = requireText(value, "id");
  optionalText(value, "time");
  if (!isObject(value.data)) throw invalid("data", "must be an object");
  const event = parseChoriaObject(value.data, "data.");
  if (event.type !== ceType) throw invalid("type", "does not match data.protocol");
  if (event.id !== ceId) throw invalid("id", "does not match data.id");
  return event;
}
