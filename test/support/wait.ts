/**
 * Polls an asynchronous check until it reports nothing missing, or fails with what it still
 * missed. For conditions read from outside the process (a node's log, a CLI's answer), so the
 * bound is the caller's protocol bound, not a guess at the machine's speed.
 */
export async function waitUntilAsync(what: () => Promise<string | undefined>, timeoutMs: number, pollMs = 250): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = await what();
    if (missing === undefined) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${missing}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
