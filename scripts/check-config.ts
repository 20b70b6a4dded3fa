/**
 * Checks a provisioner configuration before it is deployed (docs/deploy.md, "Checking a configuration"):
 *
 *   npm run check-config -- [--allow-literal-secrets] [--helper-layer] [--json] <file>
 *
 * Exits 1 naming each invalid key or literal secret (every one of them in one run); paths that will not exist on Lambda are
 * warnings. `--json` prints the whole result (errors, warnings, schedule, per-function secret
 * references) and exits 0: config/deployment.cjs reads it during `sls package` and fails there.
 * A usage mistake exits 2, as in every command of the project, so a script can tell it from a
 * configuration that is refused.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { checkDeploymentConfig, formatProblem } from "../lib/config/deploy-check";

/** The exit code of a usage mistake in every command of the project. */
const USAGE_ERROR = 2;
const USAGE = "usage: npm run check-config -- [--allow-literal-secrets] [--helper-layer] [--json] <file>";
const HELP = `${USAGE}

Checks a provisioner configuration as start-up and \`sls package\` will, and names every problem in one run.

  --allow-literal-secrets  report literal secrets as warnings (a throw-away deployment)
  --helper-layer           a helper layer is deployed (helperLayerDir), so /opt/... helper paths exist
  --json                   print the whole result as JSON and exit 0 (what sls package reads)
  --help                   this text

Exits 0 when the configuration can be deployed (warnings aside), 1 when it has errors or cannot be
read, 2 on a usage mistake.`;

async function main(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(HELP);
    return 0;
  }
  // Anything starting with "-" is an option, so a mistyped "-json" is refused rather than read as the file.
  const flags = new Set(argv.filter((arg) => arg.startsWith("-")));
  const files = argv.filter((arg) => !arg.startsWith("-"));
  const unknown = [...flags].filter((flag) => !["--allow-literal-secrets", "--helper-layer", "--json"].includes(flag));
  if (files.length !== 1 || unknown.length > 0) {
    const mistake = unknown.length > 0 ? `unknown option ${unknown.join(", ")}` : files.length === 0 ? "no file given" : `one file at a time, got ${files.length}`;
    console.error(`check-config: ${mistake}\n${USAGE}`);
    return USAGE_ERROR;
  }
  const file = files[0] as string;
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    console.error(`${file}: cannot be read: ${(error as Error).message}`);
    return 1;
  }
  const serviceDir = resolve(import.meta.dirname, "..");
  const result = checkDeploymentConfig(text, {
    allowLiteralSecrets: flags.has("--allow-literal-secrets"),
    helperLayer: flags.has("--helper-layer"),
    exists: (relativePath) => existsSync(join(serviceDir, relativePath)),
  });
  if (flags.has("--json")) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  }
  for (const problem of result.errors) console.error(formatProblem(file, "error", problem));
  for (const problem of result.warnings) console.error(formatProblem(file, "warning", problem));
  if (result.errors.length > 0) return 1;
  console.log(`${file}: ok (discovery ${result.discoverSchedule}, ${result.warnings.length} warning(s))`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
