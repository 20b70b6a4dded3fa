/**
 * The deployment's own messages on its lifecycle queue, beside the startup events queued there
 * (ticks.ts, discovery-continuation.ts): a JSON object whose one field names the kind.
 */

export function controlBody(field: string, content: Record<string, number>): string {
  return JSON.stringify({ [field]: content });
}

/** What a `field` message holds; undefined for any other body (a queued startup event, another kind). */
export function controlContent(body: string, field: string): Record<string, unknown> | undefined {
  // A startup event never names the field: most bodies are passed over without parsing.
  if (!body.includes(field)) return undefined;
  try {
    const content = (JSON.parse(body) as Record<string, unknown> | null)?.[field];
    return typeof content === "object" && content !== null ? (content as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
