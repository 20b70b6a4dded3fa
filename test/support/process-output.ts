import type { ChildProcess } from "node:child_process";

export interface ProcessOutput {
  text: () => string;
  /** Resolves with the first match of `pattern` in the output so far; rejects if the process exits first. */
  waitFor: (pattern: RegExp) => Promise<RegExpMatchArray>;
}

/** What `child` printed, on stdout and (unless `stdoutOnly`) stderr, as it arrives. */
export function processOutput(child: ChildProcess, options: { stdoutOnly?: boolean } = {}): ProcessOutput {
  let text = "";
  const waiters: Array<() => void> = [];
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const waiter of waiters.splice(0)) waiter();
  };
  child.stdout?.on("data", onData);
  if (!options.stdoutOnly) child.stderr?.on("data", onData);
  return {
    text: () => text,
    waitFor: (pattern) =>
      new Promise((resolveMatch, reject) => {
        const check = () => {
          const match = text.match(pattern);
          if (match) return resolveMatch(match);
          if (child.exitCode !== null) return reject(new Error(`exited ${child.exitCode} before ${pattern}: ${text.slice(-2_000)}`));
          waiters.push(check);
        };
        child.once("exit", check);
        check();
      }),
  };
}
