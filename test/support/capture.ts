import { vi } from "vitest";

/** Collects what Powertools writes to stdout and stderr while `action` runs, as lines in order. */
export function captureOutput(action: () => void): string[] {
  const capture = startCapture();
  try {
    action();
  } finally {
    capture.stop();
  }
  return capture.lines();
}

/** As captureOutput, for an action that runs until its promise settles. */
export async function captureOutputOf(action: () => Promise<void>): Promise<string[]> {
  const capture = startCapture();
  try {
    await action();
  } finally {
    capture.stop();
  }
  return capture.lines();
}

function startCapture() {
  const chunks: string[] = [];
  const record = (chunk: string | Uint8Array) => {
    chunks.push(typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk));
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, "write").mockImplementation(record),
    vi.spyOn(process.stderr, "write").mockImplementation(record),
  ];
  return {
    stop: () => {
      for (const spy of spies) spy.mockRestore();
    },
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter((line) => line.trim() !== ""),
  };
}
