import { spawn } from "node:child_process";
import { basename } from "node:path";
import { HelperError } from "../errors";
import type { HelperRequest, HelperResponse, HelperRunner } from "../ports";
import { DEFAULT_MAX_OUTPUT_BYTES, decodeHelperResponse, encodeHelperRequest } from "./codec";
import { splitCommandLine } from "./shellwords";

export interface ExecHelperRunnerOptions {
  /** The `helper` config value: a command line split shell-style, never run through a shell. */
  command: string;
  /** Default 10 s, as in the Go daemon. */
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** Extra environment for the helper; the provisioner's own environment is inherited. */
  env?: Record<string, string>;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const STDERR_TAIL_BYTES = 1024;

interface Outcome {
  stdout: Buffer;
  stderrTail: string;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  failure?: "timeout" | "too-large";
}

/**
 * Runs the user helper as a child process, as the Go daemon does: host JSON on stdin, response JSON
 * on stdout. The child leads its own process group so a timeout kills everything it started.
 * Errors carry the program name and stderr tail, never stdin (it holds JWT claims).
 */
export class ExecHelperRunner implements HelperRunner {
  private readonly argv: string[];
  private readonly program: string;
  private readonly timeoutMs: number;
  private readonly maxOutputBytes: number;

  constructor(private readonly options: ExecHelperRunnerOptions) {
    this.argv = splitCommandLine(options.command);
    const program = this.argv[0];
    if (program === undefined) throw new HelperError("cannot parse helper command: empty");
    this.program = basename(program);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  }

  async run(request: HelperRequest): Promise<HelperResponse> {
    const outcome = await this.execute(encodeHelperRequest(request));
    const stderr = scrubClaims(outcome.stderrTail, request);
    const detail = stderr ? `; stderr: ${stderr}` : "";
    if (outcome.failure === "timeout") {
      throw new HelperError(`helper ${this.program} timed out after ${this.timeoutMs} ms${detail}`);
    }
    if (outcome.failure === "too-large") {
      throw new HelperError(`helper ${this.program} output too large (limit ${this.maxOutputBytes} bytes)`);
    }
    // The Go daemon reports empty output before it looks at the exit status.
    if (outcome.stdout.byteLength === 0) {
      throw new HelperError(`cannot read ${this.program} output: zero bytes received${detail}`);
    }
    if (outcome.exitCode !== 0) {
      const how = outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${outcome.exitCode}`;
      throw new HelperError(`could not run helper ${this.program}: ${how}${detail}`);
    }
    return decodeHelperResponse(outcome.stdout, this.program);
  }

  private execute(input: Uint8Array): Promise<Outcome> {
    const [file, ...args] = this.argv as [string, ...string[]];
    return new Promise((resolve, reject) => {
      const child = spawn(file, args, {
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
        env: { ...process.env, ...this.options.env },
      });
      const chunks: Buffer[] = [];
      let size = 0;
      let stderrTail = Buffer.alloc(0);
      let failure: Outcome["failure"];

      const killGroup = (reason: NonNullable<Outcome["failure"]>) => {
        failure ??= reason;
        try {
          if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        } catch {
          // The group is already gone.
        }
      };
      const timer = setTimeout(() => killGroup("timeout"), this.timeoutMs);

      child.on("error", (error) => {
        clearTimeout(timer);
        reject(new HelperError(`cannot start helper ${this.program}: ${(error as NodeJS.ErrnoException).code ?? error.message}`, { cause: error }));
      });
      child.stdout.on("data", (chunk: Buffer) => {
        size += chunk.byteLength;
        if (size > this.maxOutputBytes) {
          killGroup("too-large");
          return;
        }
        chunks.push(chunk);
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderrTail = Buffer.concat([stderrTail, chunk]).subarray(-STDERR_TAIL_BYTES);
      });
      child.on("close", (exitCode, signal) => {
        clearTimeout(timer);
        resolve({
          stdout: Buffer.concat(chunks),
          stderrTail: stderrTail.toString("utf8").trim(),
          exitCode,
          signal,
          failure,
        });
      });

      // A helper that ignores stdin closes the pipe early; like Go, that is not an error by itself.
      child.stdin.on("error", () => {});
      child.stdin.end(input);
    });
  }
}

/** Claim values shorter than this are left alone: masking them would garble ordinary words. */
const MIN_SCRUBBED_LENGTH = 6;

/**
 * A helper that echoes its input to stderr would put the JWT claims (the provisioning token among
 * them) into our error message; mask every claim string before the tail is reported.
 */
function scrubClaims(text: string, request: HelperRequest): string {
  if (!text || !request.jwt) return text;
  const values: string[] = [];
  const collect = (value: unknown): void => {
    if (typeof value === "string" && value.length >= MIN_SCRUBBED_LENGTH) values.push(value);
    else if (value && typeof value === "object") Object.values(value).forEach(collect);
  };
  collect(request.jwt);
  return values
    .sort((a, b) => b.length - a.length)
    .reduce((masked, value) => masked.split(value).join("[redacted]"), text);
}
