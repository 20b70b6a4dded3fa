/**
 * The package-time check of a provisioner configuration (`npm run check-config -- <file>`, and
 * `sls package` / `sls deploy` through config/deployment.cjs): the same validation as start-up, plus
 * what only matters for a deployment — literal secrets, which would land in the Lambda environment
 * and the CloudFormation template, local paths that will not exist on Lambda, and a renewal that
 * can never keep up with the credential lifetime configured (renew-capacity.ts). It also derives
 * what the template takes from the configuration: the discovery schedule and, per function, the
 * secret references its role may read.
 */
import { parse as parseYaml } from "yaml";
import { ConfigError, ConfigProblemsError } from "../errors";
import { splitCommandLine } from "../helper/shellwords";
import type { Logger } from "../ports/logger";
import { parseConfig } from "./config";
import { STACK_DEPLOYMENT_ID_ENV } from "./deployment";
import { formatDuration, parseDuration } from "./duration";
import { CONFIG_KEYS } from "./keys";
import { UNKNOWN_KEY_WARNING } from "./raw-document";
import { renewCapacityProblems } from "./renew-capacity";
import { MATERIAL_OR_PATH, looksLikePath } from "./shapes";
import {
  FUNCTION_NAMES,
  FUNCTION_SETTINGS,
  SECRET_KEYS,
  parseSecretReference,
  settingValue,
  type FunctionName,
  type SecretReference,
} from "./secrets";

/** Files shipped in every function's bundle: `config/files/x.pem` is `/var/task/config/files/x.pem` on Lambda. */
const SHIPPED_DIR = "config/files/";
/** Where Lambda mounts layers; a helper layer built from a directory puts its `bin/` at `/opt/bin`. */
const LAYER_ROOT = "/opt/";

export interface DeployCheckOptions {
  /** Accept literal secrets (a local or throw-away deployment); they are still reported. */
  allowLiteralSecrets?: boolean;
  /** A helper layer is deployed (`helperLayerDir` param), so `/opt/...` helper paths exist. */
  helperLayer?: boolean;
  /** Whether a relative path exists in the service directory (it is shipped only under SHIPPED_DIR). */
  exists?: (relativePath: string) => boolean;
}

export interface DeployProblem {
  /** The YAML key, dotted for nested keys; `(root)` for the document. */
  key: string;
  message: string;
}

export interface DeployCheck {
  errors: DeployProblem[];
  warnings: DeployProblem[];
  site: string;
  /** EventBridge expression of the discovery schedule, from `interval`. */
  discoverSchedule: string;
  helperFunction: string | undefined;
  /** The references each function's loader resolves, hence the only ones its role may read. */
  references: Record<FunctionName, SecretReference[]>;
}

const CERTIFICATE = /^\s*-----BEGIN /;
const MINUTE_MS = 60_000;
const DEFAULT_SCHEDULE = "rate(1 minute)";
const HEX_PUBLIC_KEY = /^[0-9a-fA-F]{64}$/;

export function checkDeploymentConfig(text: string, options: DeployCheckOptions = {}): DeployCheck {
  const errors: DeployProblem[] = [];
  const warnings: DeployProblem[] = [];
  const result: DeployCheck = {
    errors,
    warnings,
    site: "",
    discoverSchedule: DEFAULT_SCHEDULE,
    helperFunction: undefined,
    references: Object.fromEntries(FUNCTION_NAMES.map((fn) => [fn, []])) as unknown as Record<FunctionName, SecretReference[]>,
  };

  let document: unknown;
  try {
    document = parseYaml(text, { version: "1.1" });
  } catch (error) {
    errors.push({ key: "(root)", message: `not valid YAML: ${(error as Error).message}` });
    return result;
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) {
    errors.push({ key: "(root)", message: "must be a YAML mapping" });
    return result;
  }
  const raw = document as Record<string, unknown>;

  try {
    // The stack sets STACK_DEPLOYMENT_ID (serverless.yml), so a file without deployment_id is deployable.
    const stackEnv = { [STACK_DEPLOYMENT_ID_ENV]: "<stage>/<region>/<account>" };
    const config = parseConfig(raw, { env: stackEnv, logger: collectKeyWarnings(warnings) });
    result.site = config.site;
    result.helperFunction = config.helperFunction;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const problems = error instanceof ConfigProblemsError ? error.problems : [error];
    for (const problem of problems) errors.push({ key: problem.key, message: problem.reason });
  }

  for (const fn of FUNCTION_NAMES) {
    for (const setting of FUNCTION_SETTINGS[fn]) {
      const value = settingValue(raw, setting);
      const reference = typeof value === "string" ? parseSecretReference(value) : undefined;
      if (reference) result.references[fn].push(reference);
    }
  }

  // From the document, so they come in the same run as parseConfig's problems.
  result.discoverSchedule = discoverScheduleOf(raw, errors);
  for (const { kind, key, message } of renewCapacityProblems(raw)) (kind === "error" ? errors : warnings).push({ key, message });
  checkLiteralSecrets(raw, options, errors, warnings);
  checkPaths(raw, options, warnings);
  return result;
}

/**
 * The discovery schedule, an EventBridge rate of `interval`: whole minutes only. An interval that
 * does not parse or is under a minute is parseConfig's to report; the schedule is then the default.
 */
function discoverScheduleOf(raw: Record<string, unknown>, errors: DeployProblem[]): string {
  const written = CONFIG_KEYS.interval.schema.safeParse(raw.interval ?? undefined);
  const intervalMs = written.success ? durationOrUndefined(written.data) : undefined;
  if (intervalMs === undefined || intervalMs < MINUTE_MS) return DEFAULT_SCHEDULE;
  const minutes = intervalMs / MINUTE_MS;
  if (!Number.isInteger(minutes)) {
    errors.push({
      key: "interval",
      message: `must be a whole number of minutes (${formatDuration(Math.floor(minutes) * MINUTE_MS)} or ${formatDuration(Math.ceil(minutes) * MINUTE_MS)}, not ${formatDuration(intervalMs)}): it is also the discovery schedule, an EventBridge rate; got "${written.data}"`,
    });
    return DEFAULT_SCHEDULE;
  }
  return minutes === 1 ? DEFAULT_SCHEDULE : `rate(${minutes} minutes)`;
}

function durationOrUndefined(text: string): number | undefined {
  try {
    return parseDuration(text);
  } catch {
    return undefined;
  }
}

function checkLiteralSecrets(raw: Record<string, unknown>, options: DeployCheckOptions, errors: DeployProblem[], warnings: DeployProblem[]) {
  for (const key of SECRET_KEYS) {
    const value = settingValue(raw, key);
    if (typeof value !== "string" || value === "" || parseSecretReference(value)) continue;
    const material = MATERIAL_OR_PATH[key as keyof typeof MATERIAL_OR_PATH];
    if (material && !material.accepts(value)) continue; // a file path: checkPaths looks at it
    const stored = "is a literal secret: it would be stored in the Lambda environment and the CloudFormation template";
    // Allowed, the warning must not tell the user to pass the switch they already passed.
    const problem = options.allowLiteralSecrets
      ? { key, message: `${stored}; accepted because allowLiteralSecrets=true, fine for a throw-away or local deployment only` }
      : {
          key,
          message: `${stored}. Use ssm:/<parameter> or secretsmanager:<secret>, or pass allowLiteralSecrets=true (--allow-literal-secrets) for a throw-away deployment`,
        };
    (options.allowLiteralSecrets ? warnings : errors).push(problem);
  }
}

function checkPaths(raw: Record<string, unknown>, options: DeployCheckOptions, warnings: DeployProblem[]) {
  const paths: Array<{ key: string; path: string; secret: boolean }> = [];
  const helper = raw.helper;
  if (typeof helper === "string" && helper.trim() !== "" && !raw.helper_function) {
    const program = safeProgram(helper);
    // A bare name is looked up on Lambda's PATH (/opt/bin of layers first, then the runtime's).
    if (program && program.includes("/")) paths.push({ key: "helper", path: program, secret: false });
  }
  for (const key of ["tls.ca", "tls.cert", "jwt_verify_cert"]) {
    const value = settingValue(raw, key);
    if (typeof value !== "string" || value === "" || parseSecretReference(value) || CERTIFICATE.test(value)) continue;
    if (key === "jwt_verify_cert" && HEX_PUBLIC_KEY.test(value)) continue;
    paths.push({ key, path: value, secret: false });
  }
  for (const [key, material] of Object.entries(MATERIAL_OR_PATH)) {
    const value = settingValue(raw, key);
    if (typeof value !== "string" || value === "" || parseSecretReference(value) || material.accepts(value) || !looksLikePath(value)) continue;
    paths.push({ key, path: value, secret: true });
  }

  for (const { key, path, secret } of paths) {
    const problem = pathProblem(key, path, options);
    if (problem) warnings.push({ key, message: problem });
    else if (secret) {
      warnings.push({ key, message: `${path} ships a credential inside every function's bundle; an ssm: or secretsmanager: reference keeps it out` });
    }
  }
}

function pathProblem(key: string, path: string, options: DeployCheckOptions): string | undefined {
  const advice = `ship it under ${SHIPPED_DIR} and give the relative path, or use an ssm: / secretsmanager: reference`;
  if (path.startsWith(LAYER_ROOT)) {
    if (key === "helper" && options.helperLayer) return undefined;
    return key === "helper"
      ? `${path} exists on Lambda only in a layer: set the helperLayerDir param (docs/deploy.md, "Executable helpers")`
      : `${path} exists on Lambda only in a layer; ${advice}`;
  }
  if (path.startsWith("/")) {
    return key === "helper"
      ? `${path} is not shipped with the deployment (Lambda has the bundle at /var/task, layers at /opt and the runtime image): ship the helper as a layer (helperLayerDir) or use helper_function`
      : `${path} will not exist on Lambda (it has the bundle at /var/task, layers at /opt and the runtime image); ${advice}`;
  }
  const relative = path.replace(/^\.\//, "");
  if (!relative.startsWith(SHIPPED_DIR)) return `${path} is not shipped to Lambda; ${advice}`;
  if (options.exists && !options.exists(relative)) return `${path} does not exist, so it is not shipped`;
  return undefined;
}

function safeProgram(command: string): string | undefined {
  try {
    return splitCommandLine(command)[0];
  } catch {
    return undefined; // parseConfig's helper check reports an unparsable command line
  }
}

function collectKeyWarnings(warnings: DeployProblem[]): Logger {
  const ignore = () => undefined;
  return {
    debug: ignore,
    info: ignore,
    error: ignore,
    warn: (message, attributes) => {
      const key = String(attributes?.setting ?? "(root)");
      const detail = attributes?.detail;
      const didYouMean = attributes?.didYouMean;
      // The key it was likely meant to be comes first: that is the fix.
      if (message === UNKNOWN_KEY_WARNING && typeof didYouMean === "string") {
        warnings.push({ key, message: `unknown key, did you mean "${didYouMean}"? It is ignored (the Go daemon ignores unknown keys too)` });
        return;
      }
      // Only unknown keys are what the Go daemon also ignores; other warnings stand as they are.
      const suffix = typeof detail === "string" ? `: ${detail}` : message === UNKNOWN_KEY_WARNING ? ": the Go daemon ignores it too" : "";
      warnings.push({ key, message: `${message}${suffix}` });
    },
  };
}

/** One line per problem, as `check-config` prints them. */
export function formatProblem(source: string, kind: "error" | "warning", problem: DeployProblem): string {
  return `${source}: ${kind}: ${problem.key}: ${problem.message}`;
}
