import { HelperError } from "../errors";
import type { HelperRequest, HelperResponse, HelperRunner } from "../ports/helper";
import { DEFAULT_MAX_OUTPUT_BYTES, decodeHelperResponse, encodeHelperRequest } from "./codec";
import { HelperLauncher, HelperStartError, type LaunchOutcome } from "./launcher";
import { redactHelperText } from "./redact-output";
import { splitCommandLine } from "./shellwords";

export interface ExecHelperRunnerOptions {
  /** The `helper` config value: a command line split shell-style, never run through a shell. */
  command: string;
  /** Default 10 s, as in the Go daemon. */
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** Extra environment for the helper; the provisioner's own environment (as at the first run) is inherited. */
  env?: Record<string, string>;
  /**
   * Every known secret value (the configuration's `secretValues`): masked in the stderr an error
   * quotes, with the host's JWT claims, whatever the helper's output marks secret, and whatever
   * looks like key material (redact-output.ts).
   */
  secretValues?: Iterable<string>;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/**
 * How much of stderr is kept to redact: far more than is shown (STDERR_SHOWN_CHARS), so a secret
 * the shown tail would cut into is still whole, and found, in what is kept.
 */
const STDERR_KEPT_BYTES = 16 * 1024;

/** The container's one launcher process (./launcher.ts), shared by every runner. */
const launcher = new HelperLauncher();

/** A run's outcome with its stderr masked (redactHelperText) in place of the raw tail. */
interface HelperRun extends Omit<LaunchOutcome, "stderrTail"> {
  stderr: string;
}

/**
 * Runs the user helper as a child process, as the Go daemon does: host JSON on stdin, response JSON
 * on stdout. The child leads its own process group so a timeout kills everything it started. It is
 * started by the launcher process (./launcher.ts), a small process whose fork costs little.
 * Errors name the program as configured (the whole path: `/opt/x` for `/opt/bin/x` is the usual
 * layer mistake) and carry stderr's tail with every known secret and anything shaped like a key
 * masked, never stdin (it holds JWT claims). The timeout bounds the whole run, a process the
 * helper left holding its output included (./launcher.ts). The caller prefixes the step
 * ("helper: ..."), so messages do not say "helper" again.
 */
export class ExecHelperRunner implements HelperRunner {
  private readonly argv: string[];
  private readonly program: string;
  private readonly timeoutMs: number;
  private readonly maxOutputBytes: number;
  private readonly secretValues: readonly string[];
  /** The provisioner's environment at the first run, with the configured extra variables. */
  private envId: number | undefined;

  constructor(private readonly options: ExecHelperRunnerOptions) {
    this.argv = splitCommandLine(options.command);
    const program = this.argv[0];
    if (program === undefined) throw new HelperError("cannot parse the helper command line: it is empty");
    this.program = program;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    this.secretValues = [...(options.secretValues ?? [])];
  }

  async run(request: HelperRequest): Promise<HelperResponse> {
    const outcome = await this.execute(request);
    const detail = outcome.stderr ? `; stderr: ${outcome.stderr}` : "";
    if (outcome.failure === "timeout") {
      throw new HelperError(`${this.program} timed out after ${this.timeoutMs} ms${detail}`);
    }
    if (outcome.failure === "too-large") {
      throw new HelperError(`${this.program} output too large (limit ${this.maxOutputBytes} bytes)`);
    }
    // The helper exited, but a process it left behind kept its output open: the launcher stopped
    // reading after a short grace, so the output may be cut short, and the message says why.
    const held = outcome.outputHeldOpen ? "; a process it started held its output open after it exited, so what was read by then may be incomplete" : "";
    // The Go daemon reports empty output before it looks at the exit status.
    if (outcome.stdout.byteLength === 0) {
      throw new HelperError(`cannot read ${this.program} output: zero bytes received${held}${detail}`);
    }
    if (outcome.exitCode !== 0) {
      const how = outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${outcome.exitCode}`;
      throw new HelperError(`${this.program} ${how}${held}${detail}`);
    }
    try {
      return decodeHelperResponse(outcome.stdout, this.program);
    } catch (error) {
      if (!held || !(error instanceof HelperError)) throw error;
      throw new HelperError(`${error.message}${held}${detail}`, { cause: error });
    }
  }

  /**
   * Runs the helper and masks its stderr here, where the raw text arrives: errors, and through
   * them the logs, the registry's last error, `status` and the dead-letter attributes, only ever
   * get the masked text.
   */
  private async execute(request: HelperRequest): Promise<HelperRun> {
    const { stderrTail, ...outcome } = await this.launch(encodeHelperRequest(request));
    const stderr = redactHelperText(stderrTail, { secrets: this.secretValues, request, output: outcome.stdout });
    return { ...outcome, stderr };
  }

  private async launch(input: Uint8Array): Promise<LaunchOutcome> {
    const [file, ...args] = this.argv as [string, ...string[]];
    try {
      return await launcher.launch({
        file,
        args,
        envId: (this.envId ??= launcher.environment({ ...process.env, ...this.options.env })),
        input,
        timeoutMs: this.timeoutMs,
        maxOutputBytes: this.maxOutputBytes,
        stderrKeptBytes: STDERR_KEPT_BYTES,
      });
    } catch (error) {
      if (error instanceof HelperStartError) throw new HelperError(`cannot start ${this.program}: ${startProblem(this.program, error.code)}`, { cause: error });
      throw error;
    }
  }
}

/** Why a program could not start, in words, with the code for searching. */
function startProblem(program: string, code: string): string {
  if (code === "ENOENT") {
    // Layers are mounted at /opt; a layer built from a directory has its executables in /opt/bin.
    const layerHint = program.startsWith("/opt/") && !program.startsWith("/opt/bin/") ? "; a helper layer's executables are in /opt/bin" : "";
    return `no such file (ENOENT)${layerHint}`;
  }
  if (code === "EACCES") return "not executable (EACCES)";
  return code;
}
