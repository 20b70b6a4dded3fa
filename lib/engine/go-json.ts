/**
 * JSON text as Go's encoding/json writes a decoded `map[string]any`: object keys sorted bytewise at
 * every level, and `<`, `>`, `&`, U+2028, U+2029 escaped. The helper receives the inventory (and
 * the node receives `config`) in exactly this form in the Go daemon.
 */
const GO_ESCAPES: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};

function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

// Serialised by hand: rebuilding objects with sorted keys would not survive JS's own ordering of
// integer-like keys ("10" before "9" in Go, after it in a JS object).
function encode(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) return `[${value.map(encode).join(",")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, entry]) => entry !== undefined)
      .sort(([a], [b]) => compareUtf8(a, b));
    return `{${entries.map(([key, entry]) => `${JSON.stringify(key)}:${encode(entry)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function encodeGoJson(value: unknown): string {
  return encode(value).replace(/[<>&\u2028\u2029]/g, (character) => GO_ESCAPES[character] ?? character);
}
