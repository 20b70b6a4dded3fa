import { vi } from "vitest";

/** Collects what Powertools writes to stdout and stderr while `action` runs, as lines in order. */
export function captureOutput(action: () => void): string[] {
  const chunks: string[] = [];
  const record = (chunk: string | Uint8Array) => {
    chunks.push(typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk));
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(record),
    vi.spyOn(process.stderr, "write").mockImplementation(record),
  ];
  try {
    action();
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  return chunks.join("").split("\n").filter((line) => line.trim() !== "");
}
